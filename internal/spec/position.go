package spec

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// sourceLines splits the source once; error positions inside scalars need it.
func (s *Spec) sourceLines() []string {
	if s.lines == nil {
		s.lines = strings.Split(string(s.Source), "\n")
	}
	return s.lines
}

// nodeAt returns the value node recorded for path, or the nearest recorded
// ancestor (a missing field is reported at its parent mapping).
func (s *Spec) nodeAt(path string) *yaml.Node {
	for {
		if n, ok := s.nodes[path]; ok {
			return n
		}
		if path == "" {
			return nil
		}
		path = parentPath(path)
	}
}

// parentPath strips the last ".field", "[3]" or "[\"key\"]" from a path.
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndex(p, "["); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexAny(p, ".["); i >= 0 {
		return p[:i]
	}
	return ""
}

// scalarOffsetPos maps a byte offset in a scalar's decoded value to the
// line:col of that character in the source, following the scalar's style:
// quotes, escapes, ” in single quotes, line folding and literal blocks.
// Folded block scalars (>) are approximated by their first content line.
func scalarOffsetPos(lines []string, n *yaml.Node, off int) (int, int) {
	if n == nil {
		return 1, 1
	}
	if off <= 0 && n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
			return n.Line, n.Column + 1
		}
		return n.Line, n.Column
	}
	if n.Line < 1 || n.Line > len(lines) {
		return n.Line, n.Column
	}
	if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return blockOffsetPos(lines, n, off)
	}
	// Start at the node's column (characters) on its line.
	line := n.Line
	text := lines[line-1]
	i := byteIndexOfCol(text, n.Column)
	col := n.Column
	double := n.Style&yaml.DoubleQuotedStyle != 0
	single := n.Style&yaml.SingleQuotedStyle != 0
	if double || single {
		i++
		col++
	}
	produced := 0
	for produced < off {
		if i >= len(text) { // line break inside a flow scalar folds to one character
			if line >= len(lines) {
				break
			}
			line++
			text = lines[line-1]
			i, col = 0, 1
			for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
				i++
				col++
			}
			produced++
			continue
		}
		c := text[i]
		switch {
		case double && c == '\\' && i+1 < len(text):
			step, size := escapeSize(text[i+1:])
			produced += size
			i += 1 + step
			col += 1 + step
		case single && c == '\'' && i+1 < len(text) && text[i+1] == '\'':
			produced++
			i += 2
			col += 2
		default:
			_, size := utf8.DecodeRuneInString(text[i:])
			produced += size
			i += size
			col++
		}
	}
	return line, col
}

// escapeSize returns how many source bytes follow the backslash of a
// double-quoted escape and how many bytes it decodes to.
func escapeSize(s string) (srcLen, outLen int) {
	hex := func(n int) (int, int) {
		if len(s) < 1+n {
			return len(s), 1
		}
		v, err := strconv.ParseUint(s[1:1+n], 16, 32)
		if err != nil {
			return 1, 1
		}
		return 1 + n, max(1, utf8.RuneLen(rune(v)))
	}
	switch s[0] {
	case 'x':
		return hex(2)
	case 'u':
		return hex(4)
	case 'U':
		return hex(8)
	case 'N', '_':
		return 1, 2
	case 'L', 'P':
		return 1, 3
	}
	return 1, 1
}

func byteIndexOfCol(text string, col int) int {
	c := 1
	for i := range text {
		if c == col {
			return i
		}
		c++
	}
	return len(text)
}

func blockOffsetPos(lines []string, n *yaml.Node, off int) (int, int) {
	// Content starts on the line after the indicator; its indentation is
	// that of the first non-blank content line.
	first := n.Line + 1
	indent := 0
	for l := first; l <= len(lines); l++ {
		t := lines[l-1]
		if strings.TrimSpace(t) == "" {
			continue
		}
		indent = len(t) - len(strings.TrimLeft(t, " "))
		break
	}
	if n.Style&yaml.FoldedStyle != 0 {
		return first, indent + 1
	}
	before := n.Value[:min(off, len(n.Value))]
	k := strings.Count(before, "\n")
	lineStart := strings.LastIndex(before, "\n") + 1
	return first + k, indent + 1 + utf8.RuneCountInString(before[lineStart:])
}
