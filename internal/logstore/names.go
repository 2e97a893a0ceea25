package logstore

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

const (
	chunkSuffix = ".chunk"
	endName     = "end"
	// nonceLen is the writer nonce's length in hex digits (64 random bits:
	// two deliveries of one attempt never share one).
	nonceLen = 16
	// endVersion is the end marker's schema version.
	endVersion = 1
)

func newNonce() string {
	var b [nonceLen / 2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

// chunkName is "<seq>.<nonce>.chunk" with seq zero-padded, so a store's
// key order is the writer's order.
func chunkName(seq int, nonce string) string {
	return fmt.Sprintf("%0*d.%s%s", seqDigits, seq, nonce, chunkSuffix)
}

// parseChunkName accepts exactly what chunkName makes, with seq below
// MaxChunks; anything else is not a chunk (and is ignored by readers).
func parseChunkName(name string) (seq int, nonce string, ok bool) {
	rest, found := strings.CutSuffix(name, chunkSuffix)
	if !found || len(rest) != seqDigits+1+nonceLen || rest[seqDigits] != '.' {
		return 0, "", false
	}
	digits, nonce := rest[:seqDigits], rest[seqDigits+1:]
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, "", false
		}
	}
	if !isNonce(nonce) {
		return 0, "", false
	}
	seq, err := strconv.Atoi(digits)
	if err != nil || seq >= MaxChunks {
		return 0, "", false
	}
	return seq, nonce, true
}

func isNonce(s string) bool {
	if len(s) != nonceLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// endMarker is the last object of an attempt's log: the writer that
// finished it and what it stored.
type endMarker struct {
	Version    int       `json:"version"`
	Writer     string    `json:"writer"`
	Chunks     int       `json:"chunks"`
	Bytes      int64     `json:"bytes"`
	FinishedAt time.Time `json:"finished_at"`
	// Outcome is the attempt's result in a word or a line ("success",
	// "failed: …", "canceled"), as the writer's caller gave it.
	Outcome string `json:"outcome,omitempty"`
}

// maxOutcome bounds Outcome (it is shown, not parsed).
const maxOutcome = 1024

func (m endMarker) validate() error {
	switch {
	case m.Version != endVersion:
		return fmt.Errorf("end marker version %d (want %d)", m.Version, endVersion)
	case !isNonce(m.Writer):
		return fmt.Errorf("end marker writer %q is not a writer nonce", m.Writer)
	case m.Chunks < 1 || m.Chunks > MaxChunks:
		return fmt.Errorf("end marker chunk count %d (1–%d)", m.Chunks, MaxChunks)
	case m.Bytes < 0 || m.Bytes > int64(m.Chunks)*MaxChunkBytes:
		return fmt.Errorf("end marker byte count %d does not fit %d chunks", m.Bytes, m.Chunks)
	case len(m.Outcome) > maxOutcome:
		return fmt.Errorf("end marker outcome of %d bytes (at most %d)", len(m.Outcome), maxOutcome)
	}
	return nil
}

// decodeEnd reads and checks an end marker from r, reading at most
// maxEndBytes+1 bytes.
func decodeEnd(r io.Reader) (endMarker, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxEndBytes+1))
	if err != nil {
		return endMarker{}, fmt.Errorf("read end marker: %w", err)
	}
	if len(data) > maxEndBytes {
		return endMarker{}, fmt.Errorf("end marker over %d bytes", maxEndBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m endMarker
	if err := dec.Decode(&m); err != nil {
		return endMarker{}, fmt.Errorf("decode end marker: %w", err)
	}
	if dec.More() {
		return endMarker{}, fmt.Errorf("decode end marker: trailing data")
	}
	if err := m.validate(); err != nil {
		return endMarker{}, err
	}
	return m, nil
}
