package exechost

import (
	"bytes"
	"errors"
	"io"
	"strings"
)

// RedactByte replaces every byte of a redacted occurrence.
const RedactByte = '*'

// ErrSecretName matches an entry refused because its name or symlink target
// contains a value to redact. The error never carries the name: it would
// carry the value.
var ErrSecretName = errors.New("workspace entry name or symlink target contains a redacted value")

// RedactChunk is how much new content a Redactor reads per round (also a
// good copy buffer size for reading from one).
const RedactChunk = 32 << 10

// Redactor is a streaming reader that replaces every byte belonging to an
// occurrence of any of its values by RedactByte. The output has exactly the
// input's length, so a tar entry's size (and the archive) stays valid.
//
// Occurrences are matched on the original bytes, overlapping ones included
// ("abc" and "bcd" in "abcd" mask all four bytes), and across the source's
// read boundaries: the last maxLen-1 bytes of each round are held back until
// the next read shows whether an occurrence starts in them.
//
// A Redactor allocates its two buffers once; Reset reuses them for the next
// entry.
type Redactor struct {
	vals   [][]byte
	maxLen int
	src    io.Reader
	buf    []byte // original bytes not yet emitted: buf[:n]
	n      int
	out    []byte // redacted bytes ready to be read: out[off:ready]
	off    int
	ready  int
	carry  int // leading bytes of buf covered by an occurrence that began in emitted data
	eof    bool
	err    error
}

// NewRedactor returns a Redactor for values, or nil when no value is
// non-empty (nothing to redact: read the source directly).
func NewRedactor(values []string) *Redactor {
	vals := redactValues(values)
	if len(vals) == 0 {
		return nil
	}
	r := &Redactor{vals: vals}
	for _, v := range vals {
		r.maxLen = max(r.maxLen, len(v))
	}
	size := RedactChunk + r.maxLen - 1
	r.buf = make([]byte, size)
	r.out = make([]byte, size)
	return r
}

// redactValues drops empty values and duplicates.
func redactValues(values []string) [][]byte {
	seen := make(map[string]bool, len(values))
	var out [][]byte
	for _, v := range values {
		if v == "" || seen[v] {
			continue
		}
		seen[v] = true
		out = append(out, []byte(v))
	}
	return out
}

// Reset makes r read src from its beginning, dropping any state of the
// previous source.
func (r *Redactor) Reset(src io.Reader) {
	r.src = src
	r.n, r.off, r.ready, r.carry = 0, 0, 0, 0
	r.eof, r.err = false, nil
}

// Read implements io.Reader.
func (r *Redactor) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for r.off == r.ready {
		if r.err != nil {
			return 0, r.err
		}
		if r.eof && r.n == 0 {
			return 0, io.EOF
		}
		r.fill()
	}
	k := copy(p, r.out[r.off:r.ready])
	r.off += k
	return k, nil
}

// fill reads once from the source and emits every byte whose redaction is
// decided: all of them at EOF, else all but the last maxLen-1 (an
// occurrence starting there may continue in the next read).
func (r *Redactor) fill() {
	if !r.eof {
		m, err := r.src.Read(r.buf[r.n:])
		r.n += m
		switch {
		case errors.Is(err, io.EOF):
			r.eof = true
		case err != nil:
			r.err = err // what is buffered is dropped: the stream failed anyway
			return
		}
	}
	emit := r.n
	if !r.eof {
		emit = r.n - (r.maxLen - 1)
		if emit <= 0 {
			return // not enough to decide anything yet; read again
		}
	}
	r.emit(emit)
}

// emit redacts buf[:emit] into out and keeps buf[emit:n] (original bytes)
// for the next round.
func (r *Redactor) emit(emit int) {
	out := r.out[:emit]
	copy(out, r.buf[:emit])
	mask(out[:min(r.carry, emit)])
	carry := max(r.carry-emit, 0)
	for _, v := range r.vals {
		// Only occurrences starting before emit are decided now; they end
		// at most len(v)-1 bytes later, inside buf.
		window := r.buf[:min(r.n, emit+len(v)-1)]
		masked := 0 // out[:masked] is already masked for this value
		for from := 0; from <= len(window)-len(v); {
			i := bytes.Index(window[from:], v)
			if i < 0 {
				break
			}
			s := from + i
			end := s + len(v)
			if end > emit {
				carry = max(carry, end-emit)
				end = emit
			}
			mask(out[max(s, masked):end])
			masked = max(masked, end)
			from = s + 1 // overlapping occurrences of the same value count too
		}
	}
	r.n = copy(r.buf, r.buf[emit:r.n])
	r.carry = carry
	r.off, r.ready = 0, emit
}

func mask(b []byte) {
	for i := range b {
		b[i] = RedactByte
	}
}

// RedactBytes returns a copy of data with every byte of every occurrence of
// any non-empty value replaced by RedactByte: the in-memory form of what a
// Redactor streams.
func RedactBytes(data []byte, values []string) []byte {
	out := bytes.Clone(data)
	for _, v := range redactValues(values) {
		for from := 0; ; {
			i := bytes.Index(data[from:], v)
			if i < 0 {
				break
			}
			mask(out[from+i : from+i+len(v)])
			from += i + 1
		}
	}
	return out
}

// ContainsAny reports whether s contains any non-empty value.
func ContainsAny(s string, values []string) bool {
	for _, v := range values {
		if v != "" && strings.Contains(s, v) {
			return true
		}
	}
	return false
}
