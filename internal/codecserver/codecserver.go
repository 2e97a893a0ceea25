// Package codecserver serves Temporal's remote codec endpoint (POST
// /encode, POST /decode; the SDK's converter.NewPayloadCodecHTTPHandler)
// for the Temporal Web UI and CLI, so an operator who runs it with the key
// ring sees decrypted payloads in the browser while Temporal stores only
// ciphertext. What this package adds around the SDK handler: the bearer
// token, CORS for exactly one UI origin, exact paths and a body limit. The
// rules about where it may listen are in Listen.
package codecserver

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"

	"go.temporal.io/sdk/converter"

	"github.com/agentflow/agentflow/internal/keyfile"
)

// MaxBody bounds a request: the UI sends the payloads of one page of
// history at a time, each at most Temporal's 2 MiB blob limit.
const MaxBody = 32 << 20

// allowHeaders are the request headers the Web UI sends to a codec
// endpoint (Content-Type, X-Namespace; Authorization when it passes its
// access token).
const allowHeaders = "Authorization, Content-Type, X-Namespace"

// Options configure Handler.
type Options struct {
	Codec converter.PayloadCodec
	// Token, if set, is required as "Authorization: Bearer <token>".
	Token string
	// UIOrigin is the one origin (scheme://host[:port]) whose pages may
	// call the endpoint from a browser; "" allows no cross-origin call.
	UIOrigin string
	Logger   *slog.Logger
}

// Handler serves /encode and /decode. A request with an Origin header
// other than UIOrigin is refused (403) before any payload is read, and
// preflights are answered only for UIOrigin; preflights carry no
// credentials, so they are answered without the token.
func Handler(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	codec := converter.NewPayloadCodecHTTPHandler(o.Codec)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" {
			w.Header().Add("Vary", "Origin")
			if origin != o.UIOrigin {
				o.Logger.Warn("codec request from an origin not allowed", "origin", origin, "path", r.URL.Path)
				http.Error(w, "origin not allowed", http.StatusForbidden)
				return
			}
			w.Header().Set("Access-Control-Allow-Origin", origin)
		}
		if r.URL.Path != "/encode" && r.URL.Path != "/decode" {
			http.NotFound(w, r)
			return
		}
		switch r.Method {
		case http.MethodOptions:
			if origin == "" {
				http.Error(w, "preflight without Origin", http.StatusBadRequest)
				return
			}
			w.Header().Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			w.Header().Set("Access-Control-Allow-Headers", allowHeaders)
			w.Header().Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		case http.MethodPost:
		default:
			w.Header().Set("Allow", "POST, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if o.Token != "" && !bearerOK(r.Header.Get("Authorization"), o.Token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentflow codec"`)
			o.Logger.Warn("codec request without a valid token", "path", r.URL.Path, "remote", r.RemoteAddr)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		o.Logger.Debug("codec request", "path", r.URL.Path, "namespace", r.Header.Get("X-Namespace"))
		codec.ServeHTTP(w, r)
	})
}

func bearerOK(header, token string) bool {
	const prefix = "Bearer "
	if len(header) < len(prefix) || !strings.EqualFold(header[:len(prefix)], prefix) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(header[len(prefix):]), []byte(token)) == 1
}

// CheckOrigin accepts an exact browser origin: http or https, a host, an
// optional port, nothing else (no path, no trailing slash: the browser's
// Origin header has none, and CORS compares it byte for byte).
func CheckOrigin(origin string) error {
	u, err := url.Parse(origin)
	if err != nil {
		return fmt.Errorf("UI origin %q: %w", origin, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(origin, "/") {
		return fmt.Errorf("UI origin %q: want scheme://host[:port], e.g. http://localhost:8233", origin)
	}
	return nil
}

// ErrNeedsAuth: a codec server without a token on an address other hosts
// can reach.
var ErrNeedsAuth = errors.New("a codec server without --auth-token-file may listen on a loopback address only")

// CheckListen applies the listen rule: with a token anywhere; without one
// (insecure) only on a loopback address, since anyone who reaches the
// endpoint can decrypt every payload.
func CheckListen(addr string, insecure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if !insecure {
		return nil
	}
	if !IsLoopback(host) {
		return fmt.Errorf("listen address %q: %w", addr, ErrNeedsAuth)
	}
	return nil
}

// IsLoopback reports a loopback IP literal or "localhost"; "" (every
// interface) is not.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// maxToken bounds the token file: a token is one short line.
const maxToken = 4096

// ReadToken reads a bearer token file: owner-only mode like a key file,
// one line, surrounding white space ignored, at least 16 characters.
func ReadToken(path string) (string, error) {
	f, err := keyfile.OpenPrivate(path)
	if err != nil {
		return "", fmt.Errorf("auth token file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxToken+1))
	if err != nil {
		return "", fmt.Errorf("auth token file %s: %w", path, err)
	}
	if len(b) > maxToken {
		return "", fmt.Errorf("auth token file %s: longer than %d bytes", path, maxToken)
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case strings.ContainsAny(tok, "\r\n"):
		return "", fmt.Errorf("auth token file %s: want one line", path)
	case len(tok) < 16:
		return "", fmt.Errorf("auth token file %s: token shorter than 16 characters", path)
	}
	return tok, nil
}
