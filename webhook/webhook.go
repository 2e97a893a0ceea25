// Package webhook is the signature scheme of agentflow's run-finished
// webhooks, for both sides: the worker signs every delivery (Sign), and a
// receiver checks it (Verify). It is public so receivers written in Go can
// import it; receivers in other languages follow the same three lines:
//
//	ts   := header "X-Agentflow-Timestamp"            (unix seconds)
//	want := "sha256=" + hex(HMAC-SHA256(secret, ts + "." + raw body))
//	ok   := constant-time equal(want, header "X-Agentflow-Signature-256")
//	        and |now - ts| <= tolerance (5 minutes by default)
//
// The signature covers the timestamp so a captured delivery cannot be
// replayed outside the tolerance window (Stripe's scheme), and uses the
// header format of GitHub's X-Hub-Signature-256. Every retry of a delivery
// is signed afresh with its own timestamp. Deliveries are at least once:
// a receiver drops duplicates by the Idempotency-Key header (the run ID).
package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Header names of a signed delivery.
const (
	HeaderTimestamp = "X-Agentflow-Timestamp"
	HeaderSignature = "X-Agentflow-Signature-256"
	// HeaderIdempotencyKey carries the run ID: the same for every retry
	// and every target of one run's event.
	HeaderIdempotencyKey = "Idempotency-Key"
	signaturePrefix      = "sha256="
)

// DefaultTolerance is how far a delivery's timestamp may be from the
// receiver's clock. Every retry is re-signed, so it bounds clock skew and
// transit, not the retry schedule.
const DefaultTolerance = 5 * time.Minute

// MinSecretBytes is the shortest secret a worker accepts: an HMAC key
// shorter than this is guessable offline from one captured delivery.
const MinSecretBytes = 16

// Errors of Verify; callers answer 400/401 on any of them.
var (
	ErrMissingSignature = errors.New("webhook: missing signature or timestamp header")
	ErrBadSignature     = errors.New("webhook: signature does not match")
	ErrStale            = errors.New("webhook: timestamp outside the tolerance window")
)

// Signature is the value of HeaderSignature for body sent at ts.
func Signature(secret []byte, ts time.Time, body []byte) string {
	return signaturePrefix + hex.EncodeToString(mac(secret, strconv.FormatInt(ts.Unix(), 10), body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Sign sets HeaderTimestamp and HeaderSignature on h for body sent at now.
func Sign(h http.Header, secret []byte, now time.Time, body []byte) {
	h.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(HeaderSignature, Signature(secret, now, body))
}

// Verify checks a delivery's headers against its raw body: the signature
// (compared in constant time) and the timestamp (within tolerance of now;
// tolerance <= 0 is DefaultTolerance). The error says which check failed,
// never the expected signature.
func Verify(secret []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	ts, sig := h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if ts == "" || sig == "" {
		return ErrMissingSignature
	}
	hexSig, ok := strings.CutPrefix(sig, signaturePrefix)
	got, err := hex.DecodeString(hexSig)
	if !ok || err != nil {
		return ErrBadSignature
	}
	// The MAC first, so a forged request learns nothing from the clock
	// check; then the window.
	if !hmac.Equal(got, mac(secret, ts, body)) {
		return ErrBadSignature
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(unix, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: %s off", ErrStale, d.Round(time.Second))
	}
	return nil
}

// LoadSecret reads a webhook secret file: its content with surrounding
// whitespace removed, at least MinSecretBytes. Like the checkpoint key
// file, it must be a regular file (no symlink) that only its owner can read
// or write (mode 0600 or 0400). The secret itself is never in an error.
func LoadSecret(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("webhook secret file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("webhook secret file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("webhook secret file %s: not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("webhook secret file %s: mode %04o, want 0600 (readable by its owner only)", path, perm)
	}
	const maxSecretFile = 4 << 10
	buf, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, fmt.Errorf("webhook secret file %s: %w", path, err)
	}
	if len(buf) > maxSecretFile {
		return nil, fmt.Errorf("webhook secret file %s: over %d bytes", path, maxSecretFile)
	}
	secret := bytes.TrimSpace(buf)
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("webhook secret file %s: secret has %d bytes, want at least %d", path, len(secret), MinSecretBytes)
	}
	return secret, nil
}
