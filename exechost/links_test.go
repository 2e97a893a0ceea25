package exechost

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckSymlink(t *testing.T) {
	tests := []struct {
		link, target string
		ok           bool
	}{
		{"l", "a", true},
		{"l", ".", true},
		{"l", "./a/b/", true},
		{"a/l", "..", true},
		{"a/b/l", "../../x", true},
		{"a/b/l", "./../../x/./y", true},
		{"l", "..", false},
		{"a/l", "../..", false},
		{"a/l", "../../etc", false},
		{"d", "b/..", false},        // with b -> . this is the root's parent
		{"a/d", "../b/../x", false}, // .. after a name
		{"l", "a/../../x", false},
		{"l", "/etc", false},
		{"l", "", false},
		{"l", "a\x00b", false},
		{"l", "\xff", false},
		{"l", strings.Repeat("a/", MaxLinkTargetBytes), false},
	}
	for _, tt := range tests {
		err := CheckSymlink(tt.link, tt.target)
		if tt.ok {
			require.NoError(t, err, "%s -> %q", tt.link, tt.target)
		} else {
			require.Error(t, err, "%s -> %q", tt.link, tt.target)
		}
	}
}

// TestCheckSymlinkOnRealKernel builds random trees of directories and links
// in a temp dir, places each link only if CheckSymlink accepts it, and then
// asks the real kernel (filepath.EvalSymlinks, which follows links like
// open does) where every path of the tree, and every path through every
// link, resolves: always inside the root.
func TestCheckSymlinkOnRealKernel(t *testing.T) {
	parts := []string{"..", "..", ".", "a", "c", "l0", "l1", "l2", "l3", "a/b", "x"}
	dirs := []string{"a", "a/b", "a/b/c", "c", "c/d"}
	accepted, refused := 0, 0
	base := t.TempDir()
	for seed := range uint64(100) {
		r := rand.New(rand.NewPCG(seed, 42))
		root := filepath.Join(base, fmt.Sprint(seed))
		require.NoError(t, os.Mkdir(root, 0o755))
		real, err := filepath.EvalSymlinks(root)
		require.NoError(t, err)
		for _, d := range dirs {
			require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
		}
		var links []string
		for i := range 12 {
			dir := []string{".", ".", "a", "a", "a/b", "a/b/c", "c"}[r.IntN(7)]
			name := path.Join(dir, "l"+string(rune('0'+i%4)))
			var comps []string
			for range 1 + r.IntN(4) {
				comps = append(comps, parts[r.IntN(len(parts))])
			}
			target := strings.Join(comps, "/")
			if CheckSymlink(name, target) != nil {
				refused++
				continue
			}
			if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
				continue // name taken by an earlier link
			}
			accepted++
			links = append(links, name)
		}
		// Every link, and every path that continues through a link.
		var probes []string
		// Names only: a path with ".." of its own is refused by the
		// callers' name rule, so only the links may climb.
		for _, l := range links {
			probes = append(probes, l)
			for _, p := range parts {
				if !strings.Contains(p, "..") && p != "." {
					probes = append(probes, l+"/"+p)
				}
			}
			for _, m := range links {
				probes = append(probes, l+"/"+m)
			}
		}
		for _, p := range probes {
			got, err := filepath.EvalSymlinks(filepath.Join(root, p))
			if err != nil {
				// Dangling or looping links resolve nowhere, which is safe.
				require.True(t, errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ELOOP) ||
					errors.Is(err, syscall.ENOTDIR) || strings.Contains(err.Error(), "too many links"),
					"seed %d: %s: %v", seed, p, err)
				continue
			}
			rel, err := filepath.Rel(real, got)
			require.NoError(t, err)
			require.False(t, rel == ".." || strings.HasPrefix(rel, "../"),
				"seed %d: %s resolves to %s, outside the root (links %v)", seed, p, got, describe(root, links))
		}
	}
	t.Logf("accepted %d links, refused %d", accepted, refused)
	require.Positive(t, accepted)
	require.Positive(t, refused)
}

func describe(root string, links []string) []string {
	var out []string
	for _, l := range links {
		tgt, _ := os.Readlink(filepath.Join(root, l))
		out = append(out, l+" -> "+tgt)
	}
	return out
}
