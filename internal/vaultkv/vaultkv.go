// Package vaultkv is the worker's HashiCorp Vault: a secrets.Vault that
// reads one key of a KV version 2 secret through the official client
// (github.com/hashicorp/vault/api), authenticated by a token file, a fixed
// token (VAULT_TOKEN) or an AppRole login, in a namespace, over TLS with an
// operator-given CA.
//
// The caller (secrets.Sources) has mapped the vault:// source to a
// secrets.VaultRef and checked it against the operator's allow-list; this
// package only reads GET /v1/<mount>/data/<path> and picks data.data[key].
// Nothing is cached: every Read asks Vault, and the value is returned to
// the one attempt that asked, never logged or kept. Errors wrap the
// secrets sentinels so the step activity classifies them
// (failure.SecretType): 403 → secrets.ErrDenied (PolicyViolation), 404, a
// missing key or a non-string value → secrets.ErrNotFound (InvalidInput),
// no connection, a 5xx, 429 or a timeout → secrets.ErrUnavailable
// (SecretUnavailable, retried as infrastructure). A 403 first re-reads the
// token file (or logs in again) once: tokens rotate.
package vaultkv

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/hashicorp/vault/api"

	"github.com/agentflow/agentflow/internal/secrets"
)

// Vault is a secrets.Vault over a Vault server's KV v2 engines. Safe for
// concurrent use.
type Vault struct {
	cfg  Config
	base *api.Client // no token; sessions are clones carrying one
	log  *slog.Logger

	mu  sync.Mutex
	cur *session // nil until the first Read
}

// session is one token and a client that sends it. A new token is a new
// session, so a request always knows which token it carried.
type session struct {
	token  string
	client *api.Client
}

var _ secrets.Vault = (*Vault)(nil)

// New checks cfg (Config.Check) and builds the client. It does not contact
// Vault: a worker starts while Vault is down, and its steps' secrets fail
// as SecretUnavailable until Vault answers.
func New(cfg Config) (*Vault, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.AppRole != nil && cfg.AppRole.Mount == "" {
		ar := *cfg.AppRole
		ar.Mount = DefaultAppRoleMount
		cfg.AppRole = &ar
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	u, _ := parseAddr(cfg.Addr) // checked
	if u.Scheme == "http" && !loopback(u) {
		log.Warn("vault address is plain http: the token crosses the network unencrypted", "vault_addr", cfg.Addr)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CACert != "" {
		pool, err := loadCA(cfg.CACert)
		if err != nil {
			return nil, err
		}
		tlsCfg.RootCAs = pool
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	// An explicit config, not api.DefaultConfig: that one takes
	// VAULT_SKIP_VERIFY, VAULT_CLIENT_CERT and friends from the
	// environment; the worker's flags are the whole configuration.
	client, err := api.NewClient(&api.Config{
		Address:      u.Scheme + "://" + u.Host,
		HttpClient:   &http.Client{Transport: limitedTransport{tr}, Timeout: cfg.Timeout},
		MaxRetries:   cfg.MaxRetries,
		Timeout:      cfg.Timeout,
		CloneHeaders: true,
	})
	if err != nil {
		return nil, fmt.Errorf("vault client: %w", err)
	}
	// NewClient also reads VAULT_TOKEN and VAULT_NAMESPACE: the base client
	// carries no token, and exactly the configured namespace.
	client.ClearToken()
	client.ClearNamespace()
	if ns := strings.Trim(cfg.Namespace, "/"); ns != "" {
		client.SetNamespace(ns)
	}
	return &Vault{cfg: cfg, base: client, log: log}, nil
}

// Read implements secrets.Vault: the value of ref.Key in the latest
// version of the secret at ref.Path of KV v2 mount ref.Mount.
func (v *Vault) Read(ctx context.Context, ref secrets.VaultRef) (string, error) {
	s, err := v.session(ctx)
	if err != nil {
		return "", err
	}
	val, err := v.read(ctx, s, ref)
	if errors.Is(err, secrets.ErrDenied) && v.renewable() {
		// The token may have expired or been rotated: re-read it (or log
		// in again) once. A token file that did not change is not tried
		// again.
		fresh, rerr := v.renew(ctx, s)
		if rerr != nil {
			return "", rerr
		}
		if fresh.token == s.token {
			return "", err
		}
		v.log.Info("vault denied a read; retrying once with a renewed token", "vault_auth", v.cfg.Auth(), "vault_path", ref.Mount+"/data/"+ref.Path)
		val, err = v.read(ctx, fresh, ref)
	}
	return val, err
}

// renewable: a token file or an AppRole can yield another token.
func (v *Vault) renewable() bool { return v.cfg.TokenFile != "" || v.cfg.AppRole != nil }

// session returns the current session, acquiring the first one.
func (v *Vault) session(ctx context.Context) (*session, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.cur == nil {
		s, err := v.acquire(ctx)
		if err != nil {
			return nil, err
		}
		v.cur = s
	}
	return v.cur, nil
}

// renew replaces the session old, unless another read already did (then
// its session is the answer): one 403 burst makes one re-read or login.
func (v *Vault) renew(ctx context.Context, old *session) (*session, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.cur != nil && v.cur != old {
		return v.cur, nil
	}
	s, err := v.acquire(ctx)
	if err != nil {
		return nil, err
	}
	v.cur = s
	return s, nil
}

// acquire gets a token from the configured credential. Called with v.mu
// held.
func (v *Vault) acquire(ctx context.Context) (*session, error) {
	var tok string
	switch {
	case v.cfg.AppRole != nil:
		t, err := v.login(ctx)
		if err != nil {
			return nil, err
		}
		tok = t
	case v.cfg.TokenFile != "":
		t, err := readCredential(v.cfg.TokenFile, "token file")
		if err != nil {
			// The file vanished or went bad after the start-up check: the
			// worker's setup, not the step, and it may come back (Vault
			// Agent rewrites it).
			return nil, fmt.Errorf("%w: %v", secrets.ErrUnavailable, err)
		}
		tok = t
	default:
		tok = v.cfg.Token
	}
	if v.cur != nil && v.cur.token == tok {
		return v.cur, nil
	}
	c, err := v.base.Clone()
	if err != nil {
		return nil, fmt.Errorf("vault client: %w", err)
	}
	c.SetToken(tok)
	return &session{token: tok, client: c}, nil
}

// login performs the AppRole login and returns the new token.
func (v *Vault) login(ctx context.Context) (string, error) {
	ar := v.cfg.AppRole
	roleID, err := readCredential(ar.RoleIDFile, "AppRole role ID file")
	if err != nil {
		return "", fmt.Errorf("%w: %v", secrets.ErrUnavailable, err)
	}
	secretID, err := readCredential(ar.SecretIDFile, "AppRole secret ID file")
	if err != nil {
		return "", fmt.Errorf("%w: %v", secrets.ErrUnavailable, err)
	}
	path := "auth/" + ar.Mount + "/login"
	sec, err := v.base.Logical().WriteWithContext(ctx, path, map[string]any{"role_id": roleID, "secret_id": secretID})
	if err != nil {
		var re *api.ResponseError
		if errors.As(err, &re) && (re.StatusCode == http.StatusBadRequest || re.StatusCode == http.StatusForbidden) {
			// Vault answers a wrong role or secret ID with 400: the
			// worker's credentials do not work, a retry will not fix it.
			return "", fmt.Errorf("%w: AppRole login at %s refused (%d %s)", secrets.ErrDenied, path, re.StatusCode, v.reason(re, roleID, secretID))
		}
		return "", v.classify(ctx, err, "AppRole login at "+path, roleID, secretID)
	}
	if sec == nil || sec.Auth == nil || sec.Auth.ClientToken == "" {
		return "", fmt.Errorf("%w: AppRole login at %s returned no token", secrets.ErrUnavailable, path)
	}
	v.log.Info("vault AppRole login", "vault_auth_path", path, "token_ttl_seconds", sec.Auth.LeaseDuration)
	return sec.Auth.ClientToken, nil
}

// read is one GET of the secret and the pick of its key.
func (v *Vault) read(ctx context.Context, s *session, ref secrets.VaultRef) (string, error) {
	where := ref.String()
	kv, err := s.client.KVv2(ref.Mount).Get(ctx, ref.Path)
	if err != nil {
		if errors.Is(err, api.ErrSecretNotFound) {
			return "", fmt.Errorf("%w: %s: Vault has no such secret (404)", secrets.ErrNotFound, where)
		}
		return "", v.classify(ctx, err, "read "+where, s.token)
	}
	if kv.Data == nil {
		ver := 0
		if kv.VersionMetadata != nil {
			ver = kv.VersionMetadata.Version
		}
		return "", fmt.Errorf("%w: %s: the latest version (%d) is deleted", secrets.ErrNotFound, where, ver)
	}
	raw, ok := kv.Data[ref.Key]
	if !ok {
		return "", fmt.Errorf("%w: %s: the secret has no key %s", secrets.ErrNotFound, where, ref.Key)
	}
	val, ok := raw.(string)
	if !ok {
		// Name the JSON type, never the value.
		return "", fmt.Errorf("%w: %s: key %s holds a %s, not a string", secrets.ErrNotFound, where, ref.Key, jsonType(raw))
	}
	return val, nil
}

// classify maps a client error that is not a 404: 403 → ErrDenied; 5xx,
// 429, 412 (a standby not yet consistent), no connection, a timeout →
// ErrUnavailable; any other status → ErrNotFound (the request cannot
// work as written). The caller's own cancellation stays itself. hide are
// credentials that must not appear in the message even if Vault echoed
// them.
func (v *Vault) classify(ctx context.Context, err error, what string, hide ...string) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: %w", what, cerr)
	}
	var re *api.ResponseError
	if !errors.As(err, &re) {
		// Connection refused, TLS failure, DNS, the request timeout, a
		// response too large to be Vault's: the client already retried.
		return fmt.Errorf("%w: %s at %s: %s", secrets.ErrUnavailable, what, v.cfg.Addr, v.scrub(err.Error(), hide...))
	}
	reason := v.reason(re, hide...)
	switch {
	case re.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w: %s: Vault answered 403 (%s): the worker's token may not read it", secrets.ErrDenied, what, reason)
	case re.StatusCode >= 500, re.StatusCode == http.StatusTooManyRequests, re.StatusCode == http.StatusPreconditionFailed:
		return fmt.Errorf("%w: %s: Vault answered %d (%s)", secrets.ErrUnavailable, what, re.StatusCode, reason)
	default:
		return fmt.Errorf("%w: %s: Vault answered %d (%s)", secrets.ErrNotFound, what, re.StatusCode, reason)
	}
}

// maxReason bounds Vault's error text in our messages.
const maxReason = 200

// reason is Vault's own error text, bounded, without credentials.
func (v *Vault) reason(re *api.ResponseError, hide ...string) string {
	msg := strings.Join(re.Errors, "; ")
	if msg == "" {
		msg = http.StatusText(re.StatusCode)
	}
	msg = v.scrub(msg, hide...)
	if len(msg) > maxReason {
		msg = msg[:maxReason] + "…"
	}
	return msg
}

func (v *Vault) scrub(msg string, hide ...string) string {
	for _, h := range append(hide, v.cfg.Token) {
		if h != "" {
			msg = strings.ReplaceAll(msg, h, "[redacted]")
		}
	}
	return msg
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	default:
		return "value of another type"
	}
}

// maxResponseBytes bounds a Vault response body: a KV secret is small, and
// a server that sends more is not one to decode.
const maxResponseBytes = 1 << 20

// limitedTransport cuts response bodies at maxResponseBytes (the read
// then fails as unavailable instead of the worker decoding without end).
type limitedTransport struct{ http.RoundTripper }

func (t limitedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripper.RoundTrip(r)
	if resp != nil && resp.Body != nil {
		resp.Body = &limitedBody{rc: resp.Body, left: maxResponseBytes}
	}
	return resp, err
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

var errResponseTooLarge = fmt.Errorf("vault response larger than %d bytes", maxResponseBytes)

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
