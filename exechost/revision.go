package exechost

import (
	"fmt"
	"strings"
)

// maxSuffixDigits bounds N in ~N / ^N: walking ancestors is linear in N.
const maxSuffixDigits = 5

// minHexLen is the shortest abbreviated object ID accepted.
const minHexLen = 7

// CheckRevision accepts only what a workflow needs to name a commit: a ref
// name (git check-ref-format rules, one level allowed, printable ASCII), a
// full or abbreviated (at least 7 digits) hex object ID, each optionally
// followed by ~N / ^N ancestry suffixes. Everything else git's revision
// grammar offers — ^{…} peeling and ^{/regex} search, :/regex, rev:path,
// @{…} reflog forms, ranges, options — is refused before git runs, so a
// spec author cannot make the worker run a regex search over history or
// read a revision as an option.
func CheckRevision(rev string) error {
	switch {
	case rev == "":
		return fmt.Errorf("empty revision")
	case len(rev) > MaxRevisionBytes:
		return fmt.Errorf("revision longer than %d bytes", MaxRevisionBytes)
	case strings.HasPrefix(rev, "-"):
		return fmt.Errorf("revision %q looks like an option", rev)
	}
	base, suffix := rev, ""
	if i := strings.IndexAny(rev, "~^"); i >= 0 {
		base, suffix = rev[:i], rev[i:]
	}
	if err := checkRefName(base); err != nil {
		return fmt.Errorf("revision %q: %v (want a ref name or an object ID, optionally with ~N or ^N)", rev, err)
	}
	if isHex(base) && len(base) < minHexLen {
		return fmt.Errorf("revision %q: an object ID needs at least %d hex digits (name a ref as refs/heads/%s)", rev, minHexLen, base)
	}
	for i := 0; i < len(suffix); {
		if suffix[i] != '~' && suffix[i] != '^' {
			return fmt.Errorf("revision %q: only ~N and ^N may follow a name (no ^{…}, :, @{…})", rev)
		}
		i++
		j := i
		for j < len(suffix) && suffix[j] >= '0' && suffix[j] <= '9' {
			j++
		}
		if j-i > maxSuffixDigits {
			return fmt.Errorf("revision %q: ancestry suffix longer than %d digits", rev, maxSuffixDigits)
		}
		i = j
	}
	return nil
}

// checkRefName applies git check-ref-format --allow-onelevel, restricted to
// printable ASCII.
func checkRefName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty name")
	case name == "@":
		return fmt.Errorf("%q is not a ref name", name)
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//"):
		return fmt.Errorf("empty path component")
	case strings.HasSuffix(name, "."):
		return fmt.Errorf("ends with '.'")
	case strings.Contains(name, ".."):
		return fmt.Errorf("contains '..'")
	case strings.Contains(name, "@{"):
		return fmt.Errorf("contains '@{'")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`~^:?*[\{}`, c) >= 0 {
			return fmt.Errorf("contains %q", string(c))
		}
	}
	for _, comp := range strings.Split(name, "/") {
		if strings.HasPrefix(comp, ".") || strings.HasSuffix(comp, ".lock") {
			return fmt.Errorf("component %q begins with '.' or ends with '.lock'", comp)
		}
	}
	return nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return s != ""
}
