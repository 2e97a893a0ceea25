package activities

import (
	"io"
	"strings"
	"sync"

	"github.com/agentflow/agentflow/exechost"
)

// redacted replaces every secret value the step saw.
const redacted = "***"

// scrubber removes secret values from everything that leaves the activity:
// output, logs, failure messages. It also removes the values' encoded
// forms (secretForms): tool stdout is JSON, so a secret with a quote
// appears escaped there, and an Authorization header carries base64.
type scrubber struct {
	r     *strings.Replacer
	forms []string // what r replaces
	max   int      // the longest form's length
}

func newScrubber(values []string) *scrubber {
	olds := secretForms(values)
	if len(olds) == 0 {
		return &scrubber{}
	}
	pairs := make([]string, 0, 2*len(olds))
	longest := 0
	for _, o := range olds {
		pairs = append(pairs, o, redacted)
		longest = max(longest, len(o))
	}
	return &scrubber{r: strings.NewReplacer(pairs...), forms: olds, max: longest}
}

// secretForms is every form of the values that must never leave the
// activity or reach a checkpoint: the values, their JSON-escaped forms and,
// for values of at least exechost.MinEncodedSecret bytes, their base64 (std
// and URL-safe, every alignment), hex and URL-escaped forms. Sorted longest
// first: a strings.Replacer tries patterns in argument order, so a form
// that contains another is replaced whole. One definition for scrubbing and
// checkpoint redaction: exechost.SecretForms.
func secretForms(values []string) []string { return exechost.SecretForms(values) }

func (s *scrubber) String(v string) string {
	if s.r == nil {
		return v
	}
	return s.r.Replace(v)
}

func (s *scrubber) Bytes(b []byte) []byte {
	if s.r == nil {
		return b
	}
	return []byte(s.r.Replace(string(b)))
}

// Value scrubs every string and map key of a decoded JSON value.
func (s *scrubber) Value(v any) any {
	if s.r == nil {
		return v
	}
	switch x := v.(type) {
	case string:
		return s.String(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[s.String(k)] = s.Value(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = s.Value(e)
		}
		return out
	default:
		return v
	}
}

// Stream returns a writer that scrubs what passes through it to w (live
// stderr on its way to the log store). A form split across two Writes is
// still scrubbed: only a tail of the input that could be the start of a
// form is held back, until more arrives or Flush, so ordinary lines pass
// at once. Safe for concurrent use.
func (s *scrubber) Stream(w io.Writer) *scrubStream { return &scrubStream{s: s, w: w} }

type scrubStream struct {
	s       *scrubber
	w       io.Writer
	mu      sync.Mutex
	carry   []byte
	written int64 // bytes passed to w
	last    byte  // the last byte passed to w
}

func (z *scrubStream) Write(p []byte) (int, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.s.r == nil {
		return len(p), z.emit(p)
	}
	z.carry = append(z.carry, p...)
	if cut := safeCut(z.carry, z.s.forms); cut > 0 {
		if err := z.emit(z.s.Bytes(z.carry[:cut])); err != nil {
			return 0, err
		}
		z.carry = append(z.carry[:0], z.carry[cut:]...)
	}
	return len(p), nil
}

// Flush scrubs and passes on what is held back (the stream has ended).
func (z *scrubStream) Flush() error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if len(z.carry) == 0 {
		return nil
	}
	data := z.s.Bytes(z.carry)
	z.carry = nil
	return z.emit(data)
}

// Written reports how many bytes went on to w, and the last of them.
func (z *scrubStream) Written() (int64, byte) {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.written, z.last
}

func (z *scrubStream) emit(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	z.written += int64(len(p))
	z.last = p[len(p)-1]
	_, err := z.w.Write(p)
	return err
}

// safeCut is the longest prefix of b that can be scrubbed on its own: no
// form occurs across the cut, and none can start before it and go on in
// bytes not written yet. A cut c is unsafe for form f when, for some k in
// 1..len(f)-1, b[c-k:c] is f's first k bytes and what follows the cut
// agrees with the rest of f so far; the cut then moves to c-k (the start
// of that possible occurrence) and is checked again.
func safeCut(b []byte, forms []string) int {
	c := len(b)
	for moved := true; moved && c > 0; {
		moved = false
		for _, f := range forms {
			for k := min(len(f)-1, c); k >= 1; k-- {
				if string(b[c-k:c]) != f[:k] {
					continue
				}
				rest, after := f[k:], b[c:]
				if len(after) >= len(rest) && string(after[:len(rest)]) == rest ||
					len(after) < len(rest) && rest[:len(after)] == string(after) {
					c, moved = c-k, true
					break
				}
			}
		}
	}
	return c
}
