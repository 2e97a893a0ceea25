// Package testvault is a HashiCorp Vault KV version 2 server for tests,
// written here from Vault's documented HTTP API because no Vault (or
// OpenBao) server can be built on this project's machines. It serves what
// agentflow's client (internal/vaultkv, over github.com/hashicorp/vault/api)
// uses, the way Vault answers it:
//
//   - the token in X-Vault-Token, the namespace in X-Vault-Namespace (a
//     token is valid in the namespace it was made in);
//   - GET /v1/<mount>/data/<path>[?version=N] → 200
//     {"data":{"data":{...},"metadata":{"version":N,"deletion_time":"",...}}};
//     a deleted version → 404 with data.data null and its deletion_time;
//     no such secret → 404 {"errors":[]};
//   - POST|PUT /v1/<mount>/data/<path> {"data":{...}} → a new version;
//   - POST|PUT /v1/auth/approle/login {"role_id","secret_id"} → a new token
//     in "auth.client_token";
//   - a token that is missing, unknown or whose policy does not grant the
//     path → 403 {"errors":["permission denied"]} (checked before routing,
//     as Vault does);
//   - optional TLS with a CA generated for the test (CACertFile).
//
// Per-token policies grant read (GET) and write (POST/PUT) on ACL paths
// like Vault's: exact, or a prefix ending in "*". Every request is
// recorded (Requests, TokensSeen) and faults can be injected (FailWith,
// Hang). Only tests import this package.
package testvault

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentflow/agentflow/internal/testupstream"
)

// Options configure Start.
type Options struct {
	// TLS serves HTTPS with a certificate for 127.0.0.1, ::1 and localhost
	// from a CA generated for the test (CACertFile).
	TLS bool
}

// Request is one request the server received.
type Request struct {
	Method    string
	Path      string // the raw request path, "/v1/..."
	Query     string
	Namespace string // X-Vault-Namespace, trimmed of "/"
	Token     string // X-Vault-Token ("" when absent)
	Status    int    // what the server answered
}

// Policy is what a token may do: ACL paths (without /v1/) it may read and
// write. A path ending in "*" is a prefix ("secret/data/prod/*").
type Policy struct {
	Read  []string
	Write []string
}

func (p Policy) allows(paths []string, apiPath string) bool {
	for _, pat := range paths {
		if pre, ok := strings.CutSuffix(pat, "*"); ok {
			if strings.HasPrefix(apiPath, pre) {
				return true
			}
		} else if apiPath == pat {
			return true
		}
	}
	return false
}

// Server is a running KV v2 server.
type Server struct {
	// URL is the address to give the client (VAULT_ADDR): http://127.0.0.1:PORT
	// or https://127.0.0.1:PORT.
	URL string
	// CACertFile is a PEM file of the CA that signed the server's
	// certificate (VAULT_CACERT); "" without TLS.
	CACertFile string

	srv *httptest.Server

	mu       sync.Mutex
	mounts   map[string]map[string]map[string]*secret // namespace → mount → path → secret
	tokens   map[string]token
	approles map[string]approle // role ID → role
	requests []Request
	issued   int
	failWith int
	hang     chan struct{} // non-nil: requests wait for it to close (or their context)
	waiting  int           // requests waiting in hang now
}

type token struct {
	namespace string
	policy    Policy
}

type approle struct {
	namespace string
	secretID  string
	policy    Policy
}

type secret struct {
	versions []version // versions[i] is version i+1
}

type version struct {
	data    map[string]any
	created time.Time
	deleted time.Time // zero: not deleted
}

// Start starts a server with the KV v2 mount "secret" in the root
// namespace, and stops it when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{
		mounts:   map[string]map[string]map[string]*secret{"": {"secret": {}}},
		tokens:   map[string]token{},
		approles: map[string]approle{},
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	// Handshakes a test makes fail on purpose (an untrusted CA) are not
	// news.
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if opts.TLS {
		ca, err := testupstream.NewCA()
		if err != nil {
			t.Fatalf("testvault CA: %v", err)
		}
		leaf, err := ca.Leaf("127.0.0.1", "::1", "localhost")
		if err != nil {
			t.Fatalf("testvault certificate: %v", err)
		}
		s.CACertFile = filepath.Join(t.TempDir(), "vault-ca.pem")
		if err := os.WriteFile(s.CACertFile, ca.CertPEM, 0o600); err != nil {
			t.Fatalf("testvault CA file: %v", err)
		}
		s.srv.TLS = leafConfig(leaf)
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close stops the server: later requests find nothing listening (an
// unreachable Vault). Requests waiting in Hang are released first.
func (s *Server) Close() {
	s.Hang(false)
	s.srv.Close()
}

// Mount enables a KV v2 engine at mount in namespace ns ("" = root).
func (s *Server) Mount(ns, mount string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns = cleanNS(ns)
	if s.mounts[ns] == nil {
		s.mounts[ns] = map[string]map[string]*secret{}
	}
	if s.mounts[ns][mount] == nil {
		s.mounts[ns][mount] = map[string]*secret{}
	}
}

// Put writes a new version of the secret at path in mount (enabled on
// first use) of namespace ns and returns its version number.
func (s *Server) Put(ns, mount, path string, data map[string]any) int {
	s.Mount(ns, mount)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.put(cleanNS(ns), mount, path, data)
}

func (s *Server) put(ns, mount, path string, data map[string]any) int {
	sec := s.mounts[ns][mount][path]
	if sec == nil {
		sec = &secret{}
		s.mounts[ns][mount][path] = sec
	}
	sec.versions = append(sec.versions, version{data: data, created: time.Now().UTC()})
	return len(sec.versions)
}

// DeleteLatest soft-deletes the latest version of a secret, as
// `vault kv delete` does: reads of it then answer 404 with its metadata.
func (s *Server) DeleteLatest(ns, mount, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sec := s.mounts[cleanNS(ns)][mount][path]; sec != nil && len(sec.versions) > 0 {
		sec.versions[len(sec.versions)-1].deleted = time.Now().UTC()
	}
}

// AddToken makes tok a valid token in namespace ns with policy p.
func (s *Server) AddToken(tok, ns string, p Policy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[tok] = token{namespace: cleanNS(ns), policy: p}
}

// RevokeToken makes tok invalid (its requests are then denied, as an
// expired token's are).
func (s *Server) RevokeToken(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, tok)
}

// AddAppRole lets roleID with secretID log in (auth/approle in namespace
// ns); each login issues a new token with policy p.
func (s *Server) AddAppRole(ns, roleID, secretID string, p Policy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.approles[roleID] = approle{namespace: cleanNS(ns), secretID: secretID, policy: p}
}

// IssuedTokens are the tokens AppRole logins issued, in order.
func (s *Server) IssuedTokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, s.issued)
	for i := range out {
		out[i] = issuedToken(i + 1)
	}
	return out
}

func issuedToken(n int) string { return fmt.Sprintf("hvs.testvault-approle-%04d", n) }

// FailWith makes every later request answer status (e.g. 503, as a sealed
// Vault does) with {"errors":[...]}; 0 serves normally again.
func (s *Server) FailWith(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWith = status
}

// Hang makes later requests wait, answering nothing, until Hang(false),
// Close, or the client gives up (its timeout).
func (s *Server) Hang(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case on && s.hang == nil:
		s.hang = make(chan struct{})
	case !on && s.hang != nil:
		close(s.hang)
		s.hang = nil
	}
}

// Waiting is how many requests wait in Hang now.
func (s *Server) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// Requests returns every request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// TokensSeen returns the distinct tokens requests carried, in the order
// first seen.
func (s *Server) TokensSeen() []string {
	var out []string
	for _, r := range s.Requests() {
		if r.Token != "" && !slices.Contains(out, r.Token) {
			out = append(out, r.Token)
		}
	}
	return out
}

func leafConfig(leaf *testupstream.Leaf) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, MinVersion: tls.VersionTLS12}
}
