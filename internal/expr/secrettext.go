package expr

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Secret text is the one place a secret may sit inside other text: an
// egress header value ("Bearer {{ .secrets.token }}"). It is never
// evaluated as an expression and never reaches a tool: the worker
// substitutes it into the egress proxy's configuration only. Everything
// outside placeholders is literal; any other {{ }} is refused.

var secretTextRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\{\{\s*\.secrets\.([A-Za-z][A-Za-z0-9_]*)\s*\}\}`)
})

// SecretTextError is a problem in a secret text at byte Offset.
type SecretTextError struct {
	Offset int
	Msg    string
}

func (e *SecretTextError) Error() string { return e.Msg }

// ParseSecretText returns the secret names s references, in order of
// first use, or an error for any {{ }} that is not exactly a secret
// placeholder.
func ParseSecretText(s string) ([]string, error) {
	var names []string
	rest, off := s, 0
	for {
		i := strings.Index(rest, "{{")
		if j := strings.Index(rest, "}}"); j >= 0 && (i < 0 || j < i) {
			return nil, &SecretTextError{Offset: off + j, Msg: "unmatched \"}}\""}
		}
		if i < 0 {
			return names, nil
		}
		loc := secretTextRe().FindStringSubmatchIndex(rest[i:])
		if loc == nil || loc[0] != 0 {
			return nil, &SecretTextError{Offset: off + i, Msg: "only {{ .secrets.NAME }} placeholders are allowed here (no other expressions, filters or functions)"}
		}
		name := rest[i+loc[2] : i+loc[3]]
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
		rest, off = rest[i+loc[1]:], off+i+loc[1]
	}
}

// SubstituteSecretText replaces every placeholder of s with its value.
// A name without a value is an error naming it (never a value).
func SubstituteSecretText(s string, values map[string]string) (string, error) {
	names, err := ParseSecretText(s)
	if err != nil {
		return "", err
	}
	for _, n := range names {
		if _, ok := values[n]; !ok {
			return "", fmt.Errorf("secret %q has no value", n)
		}
	}
	return secretTextRe().ReplaceAllStringFunc(s, func(m string) string {
		return values[secretTextRe().FindStringSubmatch(m)[1]]
	}), nil
}
