package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// MaxSpecSize is the largest spec file accepted; the size is checked before
// any parsing happens.
const MaxSpecSize = 1 << 20

// Parse decodes a spec strictly: unknown fields, duplicate keys, wrong
// types, multiple documents, non-UTF-8 input, NUL bytes, oversized files and
// alias bombs are problems, each with file:line:col.
//
// When the document cannot be decoded at all, Parse returns (nil, ErrorList).
// When it can be decoded but has field-level problems, Parse returns the
// Spec AND the ErrorList; Validate reports those problems again together
// with its own, so Load can show everything at once.
func Parse(filename string, data []byte) (*Spec, error) {
	s := &Spec{
		File:   filename,
		Source: data,
		nodes:  map[string]*yaml.Node{},
		keys:   map[string]*yaml.Node{},
		order:  map[string][]string{},
		bad:    map[string]bool{},
	}
	fatal := func(line, col int, cause error, format string, args ...any) (*Spec, error) {
		return nil, ErrorList{{File: filename, Line: line, Col: col, Msg: fmt.Sprintf(format, args...), Cause: cause}}
	}
	if len(data) > MaxSpecSize {
		return fatal(1, 1, &LimitError{Msg: "file too large"}, "file is %d bytes, over the %d byte (1 MiB) limit", len(data), MaxSpecSize)
	}
	if line, col, ok := firstInvalidUTF8(data); ok {
		return fatal(line, col, nil, "file is not valid UTF-8 (first bad byte here)")
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		line, col := lineCol(data, i)
		return fatal(line, col, nil, "NUL byte in file")
	}

	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return fatal(1, 1, nil, "empty spec")
		}
		return nil, ErrorList{yamlError(filename, data, err)}
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, ErrorList{yamlError(filename, data, err)}
	default:
		line, col := extra.Line, extra.Column
		if len(extra.Content) > 0 {
			line, col = extra.Content[0].Line, extra.Content[0].Column
		}
		return fatal(line, col, nil, "multiple YAML documents in one file; a spec is a single document")
	}
	if len(doc.Content) == 0 {
		return fatal(1, 1, nil, "empty spec")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fatal(root.Line, root.Column, nil, "a spec must be a mapping (name, version, steps, ...), got %s", kindName(root))
	}

	d := &decoder{s: s}
	d.decode(root, reflect.ValueOf(s).Elem(), "", 0)
	if d.stopped {
		// Only the limit matters: the rest of the document was not read.
		var limit ErrorList
		for _, e := range d.errs {
			var le *LimitError
			if errors.As(e, &le) {
				limit = append(limit, e)
			}
		}
		return nil, limit
	}
	s.parseErrs = d.errs.dedupe()
	s.parseDropped = d.dropped
	if len(s.parseErrs) > 0 {
		return s, slices.Clone(s.parseErrs).truncate(s.parseDropped)
	}
	return s, nil
}

var yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns a yaml.v3 syntax error ("yaml: line 7: msg") into an
// Error. yaml.v3 reports lines only; the column is the first tab in the
// line's indentation when there is one (the commonest cause), else the
// first non-blank character.
func yamlError(file string, data []byte, err error) *Error {
	msg := err.Error()
	line := 1
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	// yaml.v3 often blames the line before the tab-indented one; look at both.
	for _, l := range []int{line, line + 1} {
		text := nthLine(data, l)
		for i, c := range text {
			if c == '\t' {
				return &Error{File: file, Line: l, Col: i + 1, Msg: "tab character in indentation (YAML indents with spaces only)"}
			}
			if c != ' ' {
				break
			}
		}
	}
	col := 1
	for i, c := range nthLine(data, line) {
		if c != ' ' {
			col = i + 1
			break
		}
	}
	return &Error{File: file, Line: line, Col: col, Msg: "YAML syntax error: " + msg}
}

func nthLine(data []byte, n int) string {
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(data, '\n')
		if j < 0 {
			return ""
		}
		data = data[j+1:]
	}
	if j := bytes.IndexByte(data, '\n'); j >= 0 {
		data = data[:j]
	}
	return string(bytes.TrimSuffix(data, []byte("\r")))
}

// lineCol converts a byte offset into a 1-based line and character column.
func lineCol(data []byte, off int) (int, int) {
	line, start := 1, 0
	for i := 0; i < off && i < len(data); i++ {
		if data[i] == '\n' {
			line++
			start = i + 1
		}
	}
	return line, utf8.RuneCount(data[start:min(off, len(data))]) + 1
}

func firstInvalidUTF8(data []byte) (line, col int, bad bool) {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			line, col = lineCol(data, i)
			return line, col, true
		}
		i += size
	}
	return 0, 0, false
}
