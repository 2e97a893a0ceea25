package expr

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

type tokKind int

const (
	tEnd    tokKind = iota // the closing }}
	tIdent                 // name, keyword
	tField                 // .name (text without the dot)
	tString                // quoted literal; str holds the decoded value
	tNumber                // numeric literal; num holds the value
	tOp                    // operator or punctuation; text holds it
)

type token struct {
	kind  tokKind
	pos   int    // byte offset into the template source
	text  string // raw text (identifier/field name/operator)
	str   string
	num   float64
	space bool // whitespace precedes the token (field access must be adjacent)
}

// two-character operators first so the longest match wins.
var ops2 = []string{"==", "!=", "<=", ">="}

const ops1 = "<>+-*/%~|()[],"

func isNameStart(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isNameChar(c byte) bool { return isNameStart(c) || ('0' <= c && c <= '9') }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// lexExpr tokenises one {{ }} body starting at src[start] (just after "{{")
// up to and including the closing "}}". It returns the tokens (the last one
// is tEnd) and the offset just past "}}".
func lexExpr(src string, start int) ([]token, int, error) {
	var toks []token
	i := start
	for {
		space := false
		for i < len(src) && isSpace(src[i]) {
			i++
			space = true
		}
		if i >= len(src) {
			return nil, 0, syntaxErrf(start-2, "unterminated expression: missing }}")
		}
		c := src[i]
		switch {
		case c == '}':
			if i+1 < len(src) && src[i+1] == '}' {
				toks = append(toks, token{kind: tEnd, pos: i, text: "}}", space: space})
				return toks, i + 2, nil
			}
			return nil, 0, syntaxErrf(i, "unexpected %q (map literals are not supported)", "}")
		case c == '{':
			return nil, 0, syntaxErrf(i, "unexpected %q inside an expression (nested {{ }} and map literals are not supported)", "{")
		case c == '\'' || c == '"':
			s, end, err := lexString(src, i)
			if err != nil {
				return nil, 0, err
			}
			toks = append(toks, token{kind: tString, pos: i, text: src[i:end], str: s, space: space})
			i = end
		case '0' <= c && c <= '9':
			end := lexNumberEnd(src, i)
			f, err := strconv.ParseFloat(src[i:end], 64)
			if err != nil {
				// ParseFloat only fails here on range errors (e.g. 1e999).
				return nil, 0, syntaxErrf(i, "invalid number %q", src[i:end])
			}
			toks = append(toks, token{kind: tNumber, pos: i, text: src[i:end], num: f, space: space})
			i = end
		case isNameStart(c):
			end := i + 1
			for end < len(src) && isNameChar(src[end]) {
				end++
			}
			toks = append(toks, token{kind: tIdent, pos: i, text: src[i:end], space: space})
			i = end
		case c == '.':
			end := i + 1
			for end < len(src) && isNameChar(src[end]) {
				end++
			}
			if end == i+1 {
				return nil, 0, syntaxErrf(i, "expected a field name after %q", ".")
			}
			toks = append(toks, token{kind: tField, pos: i, text: src[i+1 : end], space: space})
			i = end
		default:
			if i+1 < len(src) {
				two := src[i : i+2]
				matched := false
				for _, op := range ops2 {
					if two == op {
						toks = append(toks, token{kind: tOp, pos: i, text: op, space: space})
						i += 2
						matched = true
						break
					}
				}
				if matched {
					continue
				}
				switch two {
				case "&&", "||":
					return nil, 0, syntaxErrf(i, "unknown operator %q (use \"and\" / \"or\")", two)
				case "**", "//":
					return nil, 0, syntaxErrf(i, "operator %q is not supported", two)
				}
			}
			if strings.IndexByte(ops1, c) >= 0 {
				toks = append(toks, token{kind: tOp, pos: i, text: string(c), space: space})
				i++
				continue
			}
			switch {
			case c == 0:
				return nil, 0, syntaxErrf(i, "NUL byte in expression")
			case c == '=':
				return nil, 0, syntaxErrf(i, "unexpected %q (use == to compare)", "=")
			case c == '!':
				return nil, 0, syntaxErrf(i, "unexpected %q (use \"not\")", "!")
			case c >= utf8.RuneSelf:
				r, _ := utf8.DecodeRuneInString(src[i:])
				if r == utf8.RuneError {
					return nil, 0, syntaxErrf(i, "invalid UTF-8 in expression")
				}
				return nil, 0, syntaxErrf(i, "unexpected character %q", r)
			default:
				return nil, 0, syntaxErrf(i, "unexpected character %q", rune(c))
			}
		}
	}
}

func lexNumberEnd(src string, i int) int {
	digits := func(j int) int {
		for j < len(src) && '0' <= src[j] && src[j] <= '9' {
			j++
		}
		return j
	}
	end := digits(i)
	if end+1 < len(src) && src[end] == '.' && '0' <= src[end+1] && src[end+1] <= '9' {
		end = digits(end + 1)
	}
	if end < len(src) && (src[end] == 'e' || src[end] == 'E') {
		j := end + 1
		if j < len(src) && (src[j] == '+' || src[j] == '-') {
			j++
		}
		if j < len(src) && '0' <= src[j] && src[j] <= '9' {
			end = digits(j)
		}
	}
	return end
}

// lexString decodes a single- or double-quoted literal starting at src[i].
// Raw newlines are allowed because YAML double-quoted scalars turn "\n" into
// a real newline before we ever see it (the seed's join('\n\n')).
func lexString(src string, i int) (string, int, error) {
	q := src[i]
	var b strings.Builder
	j := i + 1
	for j < len(src) {
		c := src[j]
		switch {
		case c == q:
			return b.String(), j + 1, nil
		case c == 0:
			return "", 0, syntaxErrf(j, "NUL byte in string literal")
		case c == '\\':
			if j+1 >= len(src) {
				return "", 0, syntaxErrf(i, "unterminated string literal")
			}
			e := src[j+1]
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case '\\', '\'', '"', '/':
				b.WriteByte(e)
			case 'u':
				if j+6 > len(src) {
					return "", 0, syntaxErrf(j, "invalid \\u escape")
				}
				n, err := strconv.ParseUint(src[j+2:j+6], 16, 32)
				if err != nil {
					return "", 0, syntaxErrf(j, "invalid \\u escape")
				}
				r := rune(n)
				if r == 0 {
					return "", 0, syntaxErrf(j, "NUL escape in string literal")
				}
				if !utf8.ValidRune(r) {
					return "", 0, syntaxErrf(j, "invalid \\u escape (surrogate)")
				}
				b.WriteRune(r)
				j += 6
				continue
			default:
				return "", 0, syntaxErrf(j, "unknown escape \\%c", e)
			}
			j += 2
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(src[j:])
			if r == utf8.RuneError && size <= 1 {
				return "", 0, syntaxErrf(j, "invalid UTF-8 in string literal")
			}
			b.WriteString(src[j : j+size])
			j += size
		default:
			b.WriteByte(c)
			j++
		}
	}
	return "", 0, syntaxErrf(i, "unterminated string literal")
}
