package gitsource

import "github.com/agentflow/agentflow/exechost"

// MaxRevisionLen bounds a revision expression (exechost.MaxRevisionBytes).
const MaxRevisionLen = exechost.MaxRevisionBytes

// CheckRevision is the one revision rule, exechost.CheckRevision: ref names
// and object IDs with ~N/^N suffixes only, checked before git runs.
func CheckRevision(rev string) error { return exechost.CheckRevision(rev) }

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return s != ""
}
