package objstore

import (
	"fmt"
	"strconv"
	"strings"
)

// EscapeSegment makes any string (an agent, run or step ID) one key
// segment that passes CheckKey: [A-Za-z0-9_-] and inner dots pass,
// everything else (including '/', '%', '=' and a leading dot) becomes %XX,
// and "" becomes "%". The mapping is injective, so distinct IDs never share
// a key. It is the one escaping rule of every key agentflow builds from
// workflow data (logs, attempt records).
func EscapeSegment(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' && i > 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if b.Len() == 0 {
		return "%"
	}
	return b.String()
}

// UnescapeSegment inverts EscapeSegment.
func UnescapeSegment(s string) string {
	if s == "%" {
		return ""
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
