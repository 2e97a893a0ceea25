package expr

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// norm maps the Go shapes JSON-like data arrives in (YAML ints, json.Number,
// typed slices from Go callers) onto the six JSON types the evaluator works
// on. It never uses reflection: anything it does not list is refused, so no
// host object can be inspected through an expression.
func norm(v any) (any, bool) {
	switch x := v.(type) {
	case nil, bool, float64, string:
		return v, true
	case []any:
		if x == nil {
			return nil, true
		}
		return x, true
	case map[string]any:
		if x == nil {
			return nil, true
		}
		return x, true
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float32:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return nil, false
		}
		return f, true
	case []string:
		if x == nil {
			return nil, true
		}
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out, true
	case []map[string]any:
		if x == nil {
			return nil, true
		}
		out := make([]any, len(x))
		for i, m := range x {
			out[i] = m
		}
		return out, true
	case []float64:
		if x == nil {
			return nil, true
		}
		out := make([]any, len(x))
		for i, f := range x {
			out[i] = f
		}
		return out, true
	case map[string]string:
		if x == nil {
			return nil, true
		}
		out := make(map[string]any, len(x))
		for k, s := range x {
			out[k] = s
		}
		return out, true
	}
	return nil, false
}

// Truthy reports Jinja truthiness of a JSON value: null, false, 0, "", []
// and {} are falsy, everything else is truthy.
func Truthy(v any) bool {
	n, ok := norm(v)
	if !ok {
		return v != nil
	}
	switch x := n.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0 && !math.IsNaN(x)
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	}
	return "unsupported"
}

// formatNumber renders a float64 the way encoding/json does, so 3 is "3"
// and not "3.0" or "3e+00".
func formatNumber(f float64) string {
	abs := math.Abs(f)
	fmtc := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		fmtc = 'e'
	}
	s := strconv.FormatFloat(f, fmtc, -1, 64)
	if fmtc == 'e' {
		// clean up e-09 to e-9 like encoding/json
		n := len(s)
		if n >= 4 && s[n-4] == 'e' && s[n-3] == '-' && s[n-2] == '0' {
			s = s[:n-2] + s[n-1:]
		}
	}
	return s
}

// writeJSONString appends s as a JSON string literal without HTML escaping
// (values travel to tools, not browsers).
func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case c < 0x20:
				b.WriteString(`\u00`)
				b.WriteByte("0123456789abcdef"[c>>4])
				b.WriteByte("0123456789abcdef"[c&0xf])
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`)
		case r == '\u2028':
			b.WriteString(`\u2028`)
		case r == '\u2029':
			b.WriteString(`\u2029`)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
}

// encoder renders values as JSON or as interpolation text, charging the
// evaluation meter and stopping as soon as the output passes the limit.
type encoder struct {
	m   *meter
	pos int
	b   strings.Builder
}

func (e *encoder) check() error {
	if e.b.Len() > MaxResultBytes {
		return limitEvalErr(e.pos, "result larger than %d bytes", MaxResultBytes)
	}
	return nil
}

// text renders v for interpolation: strings as-is, null as "", everything
// else as JSON.
func (e *encoder) text(v any) error {
	n, ok := norm(v)
	if !ok {
		return evalErrf(e.pos, "value of unsupported type")
	}
	switch x := n.(type) {
	case nil:
		return nil
	case string:
		if err := e.m.chargeBytes(e.pos, len(x)); err != nil {
			return err
		}
		if e.b.Len()+len(x) > MaxResultBytes {
			return limitEvalErr(e.pos, "result larger than %d bytes", MaxResultBytes)
		}
		e.b.WriteString(x)
		return nil
	}
	return e.json(n)
}

func (e *encoder) json(v any) error {
	n, ok := norm(v)
	if !ok {
		return evalErrf(e.pos, "value of unsupported type")
	}
	if err := e.m.charge(e.pos, 1); err != nil {
		return err
	}
	switch x := n.(type) {
	case nil:
		e.b.WriteString("null")
	case bool:
		e.b.WriteString(strconv.FormatBool(x))
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return evalErrf(e.pos, "number %v cannot be represented in JSON", x)
		}
		e.b.WriteString(formatNumber(x))
	case string:
		if err := e.m.chargeBytes(e.pos, len(x)); err != nil {
			return err
		}
		if e.b.Len()+len(x) > MaxResultBytes {
			return limitEvalErr(e.pos, "result larger than %d bytes", MaxResultBytes)
		}
		writeJSONString(&e.b, x)
	case []any:
		e.b.WriteByte('[')
		for i, el := range x {
			if i > 0 {
				e.b.WriteByte(',')
			}
			if err := e.json(el); err != nil {
				return err
			}
		}
		e.b.WriteByte(']')
	case map[string]any:
		if err := e.m.charge(e.pos, len(x)); err != nil {
			return err
		}
		keys := sortedKeys(x)
		e.b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				e.b.WriteByte(',')
			}
			writeJSONString(&e.b, k)
			e.b.WriteByte(':')
			if err := e.json(x[k]); err != nil {
				return err
			}
		}
		e.b.WriteByte('}')
	}
	return e.check()
}

// equal is deep JSON equality; numbers compare by value, different types
// are never equal (1 != "1").
func (m *meter) equal(pos int, a, b any) (bool, error) {
	if err := m.charge(pos, 1); err != nil {
		return false, err
	}
	a, okA := norm(a)
	b, okB := norm(b)
	if !okA || !okB {
		return false, evalErrf(pos, "value of unsupported type")
	}
	switch x := a.(type) {
	case nil:
		return b == nil, nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y, nil
	case float64:
		y, ok := b.(float64)
		return ok && x == y, nil
	case string:
		y, ok := b.(string)
		if !ok {
			return false, nil
		}
		if err := m.chargeBytes(pos, len(x)); err != nil {
			return false, err
		}
		return x == y, nil
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false, nil
		}
		for i := range x {
			eq, err := m.equal(pos, x[i], y[i])
			if err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false, nil
		}
		if err := m.charge(pos, len(x)); err != nil {
			return false, err
		}
		// Sorted so the work done (and so whether a limit trips) is the
		// same on every replay of a workflow.
		for _, k := range sortedKeys(x) {
			xv := x[k]
			yv, ok := y[k]
			if !ok {
				return false, nil
			}
			eq, err := m.equal(pos, xv, yv)
			if err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	}
	return false, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
