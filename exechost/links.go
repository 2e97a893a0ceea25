package exechost

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// MaxLinkTargetBytes bounds a symlink target in a workspace.
const MaxLinkTargetBytes = 4096

// CheckSymlink is the one rule for symlinks inside a workspace. linkPath is
// the link's clean path relative to the workspace root ("a/b/l"), target is
// what the link stores. A link is accepted only if
//
//   - target is non-empty, not absolute, valid UTF-8 without NUL, and at
//     most MaxLinkTargetBytes long;
//   - ".." components appear only at the start of target (after any "."
//     or empty components there), never after a normal component; and
//   - there are no more leading ".." components than directories above
//     the link (the depth of path.Dir(linkPath)).
//
// Why this and not lexical resolution: the kernel resolves ".." after it
// has followed a link, from wherever that link led, so "b -> ." plus
// "d -> b/.." resolves to the parent of the root although path.Join says
// "d". With ".." only at the start, the climb happens from the link's own
// directory, which is a real directory (callers also refuse names that go
// through a symlink), so it cannot pass the root; every later component
// only descends, into real directories or other links that obey the same
// rule. By induction every accepted link, alone or in a chain, resolves
// inside the root (TestCheckSymlinkOnRealKernel checks this on random trees).
func CheckSymlink(linkPath, target string) error {
	switch {
	case target == "":
		return errors.New("symlink with empty target")
	case strings.IndexByte(target, 0) >= 0 || !utf8.ValidString(target):
		return errors.New("symlink target not UTF-8 or contains NUL")
	case len(target) > MaxLinkTargetBytes:
		return fmt.Errorf("symlink target longer than %d bytes", MaxLinkTargetBytes)
	case path.IsAbs(target):
		return fmt.Errorf("symlink to absolute path %q", target)
	}
	up, descended := 0, false
	for _, c := range strings.Split(target, "/") {
		switch {
		case c == "" || c == ".":
		case c == "..":
			if descended {
				return fmt.Errorf("symlink target %q has .. after a name (it would climb from wherever a link leads)", target)
			}
			up++
		default:
			descended = true
		}
	}
	if up > linkDepth(linkPath) {
		return fmt.Errorf("symlink %q points outside the workspace", target)
	}
	return nil
}

// linkDepth is the number of directories between the root and the link.
func linkDepth(linkPath string) int {
	dir := path.Dir(path.Clean(linkPath))
	if dir == "." || dir == "/" {
		return 0
	}
	return strings.Count(strings.Trim(dir, "/"), "/") + 1
}
