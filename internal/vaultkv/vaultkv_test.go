package vaultkv

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/testvault"
)

const (
	webhook = "https://hooks.slack.com/services/T0/B0/vaultkvS3cretHook"
	readTok = "hvs.reader-token-Zq81"
)

// fixture is a testvault server with the seed's secret, a token that may
// read prod/*, and a token file holding it.
type fixture struct {
	srv       *testvault.Server
	tokenFile string
}

func newFixture(t *testing.T, tlsOn bool) *fixture {
	t.Helper()
	srv := testvault.Start(t, testvault.Options{TLS: tlsOn})
	srv.Put("", "secret", "prod/slack", map[string]any{"webhook": webhook, "count": 12345.0, "nested": map[string]any{"x": "nestedS3cret"}})
	srv.Put("", "secret", "prod/db", map[string]any{"password": "dbPassw0rd"})
	srv.AddToken(readTok, "", testvault.Policy{Read: []string{"secret/data/prod/*"}})
	f := &fixture{srv: srv, tokenFile: filepath.Join(t.TempDir(), "token")}
	writeFile(t, f.tokenFile, readTok+"\n")
	return f
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	// Replace, as Vault Agent does (write a new file, rename over).
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

func (f *fixture) config() Config {
	return Config{Addr: f.srv.URL, CACert: f.srv.CACertFile, TokenFile: f.tokenFile}
}

func newVault(t *testing.T, cfg Config) *Vault {
	t.Helper()
	v, err := New(cfg)
	require.NoError(t, err)
	return v
}

// sources is the worker's resolver over v: what RunStep calls.
func sources(v secrets.Vault, prefixes ...string) *secrets.Sources {
	return &secrets.Sources{Policy: secrets.Policy{VaultPrefixes: prefixes}, Vault: v}
}

func TestReadBothForms(t *testing.T) {
	f := newFixture(t, true)
	s := sources(newVault(t, f.config()), "prod")
	for _, src := range []string{"vault://prod/slack/webhook", "vault://secret/data/prod/slack/webhook"} {
		got, err := s.Resolve(t.Context(), src)
		require.NoError(t, err, src)
		require.Equal(t, webhook, got)
	}
	got, err := s.Resolve(t.Context(), "vault://secret/data/prod/db/password")
	require.NoError(t, err)
	require.Equal(t, "dbPassw0rd", got)

	reqs := f.srv.Requests()
	require.Len(t, reqs, 3)
	for i, want := range []string{"/v1/secret/data/prod/slack", "/v1/secret/data/prod/slack", "/v1/secret/data/prod/db"} {
		require.Equal(t, "GET", reqs[i].Method)
		require.Equal(t, want, reqs[i].Path)
		require.Equal(t, readTok, reqs[i].Token)
		require.Empty(t, reqs[i].Namespace)
	}
	require.Equal(t, []string{readTok}, f.srv.TokensSeen())
}

// TestReadsLatestVersion: nothing is cached; a new version is read at
// once, a deleted latest version is not found.
func TestReadsLatestVersion(t *testing.T) {
	f := newFixture(t, false)
	v := newVault(t, f.config())
	ref := secrets.VaultRef{Mount: "secret", Path: "prod/db", Key: "password"}
	got, err := v.Read(t.Context(), ref)
	require.NoError(t, err)
	require.Equal(t, "dbPassw0rd", got)
	f.srv.Put("", "secret", "prod/db", map[string]any{"password": "rotated"})
	got, err = v.Read(t.Context(), ref)
	require.NoError(t, err)
	require.Equal(t, "rotated", got)
	f.srv.DeleteLatest("", "secret", "prod/db")
	_, err = v.Read(t.Context(), ref)
	require.ErrorIs(t, err, secrets.ErrNotFound)
	require.Contains(t, err.Error(), "version (2) is deleted")
}

func TestNamespaceAndMount(t *testing.T) {
	f := newFixture(t, false)
	const nsTok = "hvs.team-a-token"
	f.srv.Put("team-a", "kv", "apps/x", map[string]any{"key": "in-team-a"})
	f.srv.AddToken(nsTok, "team-a", testvault.Policy{Read: []string{"kv/data/apps/*"}})
	tokFile := filepath.Join(t.TempDir(), "token")
	writeFile(t, tokFile, nsTok)

	v := newVault(t, Config{Addr: f.srv.URL, TokenFile: tokFile, Namespace: "team-a/"})
	s := &secrets.Sources{Policy: secrets.Policy{VaultPrefixes: []string{"apps"}}, Vault: v, VaultMount: "kv"}
	got, err := s.Resolve(t.Context(), "vault://apps/x/key")
	require.NoError(t, err)
	require.Equal(t, "in-team-a", got)
	last := f.srv.Requests()[len(f.srv.Requests())-1]
	require.Equal(t, "team-a", last.Namespace)
	require.Equal(t, "/v1/kv/data/apps/x", last.Path)

	// The same token without the namespace is denied (a token lives in
	// its namespace), even with VAULT_NAMESPACE in the environment: the
	// flags are the configuration.
	t.Setenv("VAULT_NAMESPACE", "team-a")
	v = newVault(t, Config{Addr: f.srv.URL, TokenFile: tokFile})
	_, err = s.Resolve(t.Context(), "vault://apps/x/key")
	require.NoError(t, err, "the resolver above still has its own vault")
	_, err = (&secrets.Sources{Policy: s.Policy, Vault: v, VaultMount: "kv"}).Resolve(t.Context(), "vault://apps/x/key")
	require.ErrorIs(t, err, secrets.ErrDenied)
	require.Empty(t, f.srv.Requests()[len(f.srv.Requests())-1].Namespace)
}

func TestTLS(t *testing.T) {
	f := newFixture(t, true)
	ref := secrets.VaultRef{Mount: "secret", Path: "prod/slack", Key: "webhook"}

	// Without the CA the server's certificate is not trusted: nothing is
	// sent (no token leaves), and it is the store that is unusable. The
	// environment's VAULT_SKIP_VERIFY does not change that: the flags are
	// the configuration.
	t.Setenv("VAULT_SKIP_VERIFY", "true")
	cfg := f.config()
	cfg.CACert = ""
	_, err := newVault(t, cfg).Read(t.Context(), ref)
	require.ErrorIs(t, err, secrets.ErrUnavailable)
	require.Contains(t, err.Error(), "certificate")
	require.Empty(t, f.srv.Requests(), "a TLS handshake that failed sent a request")

	// Another CA is no better.
	other := testvault.Start(t, testvault.Options{TLS: true})
	cfg.CACert = other.CACertFile
	_, err = newVault(t, cfg).Read(t.Context(), ref)
	require.ErrorIs(t, err, secrets.ErrUnavailable)

	got, err := newVault(t, f.config()).Read(t.Context(), ref)
	require.NoError(t, err)
	require.Equal(t, webhook, got)
}

func TestAppRole(t *testing.T) {
	f := newFixture(t, true)
	dir := t.TempDir()
	roleFile, secretFile := filepath.Join(dir, "role-id"), filepath.Join(dir, "secret-id")
	writeFile(t, roleFile, "role-agentflow")
	writeFile(t, secretFile, "secret-id-0001")
	f.srv.AddAppRole("", "role-agentflow", "secret-id-0001", testvault.Policy{Read: []string{"secret/data/prod/*"}})
	cfg := Config{Addr: f.srv.URL, CACert: f.srv.CACertFile, AppRole: &AppRole{RoleIDFile: roleFile, SecretIDFile: secretFile}}
	v := newVault(t, cfg)
	ref := secrets.VaultRef{Mount: "secret", Path: "prod/slack", Key: "webhook"}

	got, err := v.Read(t.Context(), ref)
	require.NoError(t, err)
	require.Equal(t, webhook, got)
	issued := f.srv.IssuedTokens()
	require.Len(t, issued, 1)
	reqs := f.srv.Requests()
	require.Equal(t, "/v1/auth/approle/login", reqs[0].Path)
	require.Empty(t, reqs[0].Token, "the login carries no token")
	require.Equal(t, issued[0], reqs[1].Token)

	// The token expires (revoked): the 403 logs in again once, and the
	// read succeeds with the new token.
	f.srv.RevokeToken(issued[0])
	got, err = v.Read(t.Context(), ref)
	require.NoError(t, err)
	require.Equal(t, webhook, got)
	require.Len(t, f.srv.IssuedTokens(), 2)

	// Many reads meeting one expiry log in once between them.
	f.srv.RevokeToken(f.srv.IssuedTokens()[1])
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := v.Read(t.Context(), ref)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, f.srv.IssuedTokens(), 3)

	// A wrong secret ID is the worker's credential refused: PolicyViolation,
	// without the secret ID in the message.
	writeFile(t, secretFile, "secret-id-WRONG")
	f.srv.RevokeToken(f.srv.IssuedTokens()[2])
	_, err = v.Read(t.Context(), ref)
	require.ErrorIs(t, err, secrets.ErrDenied)
	require.Equal(t, failure.PolicyViolation, failure.SecretType(err))
	require.Contains(t, err.Error(), "AppRole login")
	require.NotContains(t, err.Error(), "secret-id-WRONG")
}

// TestTokenRereadOn403: a 403 re-reads the token file once; an unchanged
// file is not tried again, a rotated one is.
func TestTokenRereadOn403(t *testing.T) {
	f := newFixture(t, false)
	const stale, fresh = "hvs.stale-token", "hvs.fresh-token"
	f.srv.AddToken(fresh, "", testvault.Policy{Read: []string{"secret/data/prod/*"}})
	writeFile(t, f.tokenFile, stale)
	v := newVault(t, f.config())
	ref := secrets.VaultRef{Mount: "secret", Path: "prod/slack", Key: "webhook"}

	_, err := v.Read(t.Context(), ref)
	require.ErrorIs(t, err, secrets.ErrDenied)
	require.Len(t, f.srv.Requests(), 1, "an unchanged token file is not tried twice")

	writeFile(t, f.tokenFile, fresh+"\n")
	got, err := v.Read(t.Context(), ref)
	require.NoError(t, err)
	require.Equal(t, webhook, got)
	require.Equal(t, []string{stale, fresh}, f.srv.TokensSeen())
	require.Len(t, f.srv.Requests(), 3)

	// The fresh token is kept: the next read is one request.
	_, err = v.Read(t.Context(), ref)
	require.NoError(t, err)
	require.Len(t, f.srv.Requests(), 4)

	// A fixed token (VAULT_TOKEN) has nothing to re-read.
	v = newVault(t, Config{Addr: f.srv.URL, Token: stale})
	before := len(f.srv.Requests())
	_, err = v.Read(t.Context(), ref)
	require.ErrorIs(t, err, secrets.ErrDenied)
	require.Len(t, f.srv.Requests(), before+1)
}

// TestErrorClasses: every failure is classifiable by failure.SecretType
// through the worker's resolver, and no message carries a value or a
// token.
func TestErrorClasses(t *testing.T) {
	tests := []struct {
		name   string
		source string
		setup  func(t *testing.T, f *fixture, cfg *Config)
		want   error
		class  string
		msg    string
	}{
		{name: "403 path not granted", source: "vault://admin/x/key",
			want: secrets.ErrDenied, class: failure.PolicyViolation, msg: "403"},
		{name: "403 token revoked", source: "vault://prod/slack/webhook",
			setup: func(_ *testing.T, f *fixture, _ *Config) { f.srv.RevokeToken(readTok) },
			want:  secrets.ErrDenied, class: failure.PolicyViolation, msg: "permission denied"},
		{name: "404 no secret", source: "vault://prod/none/key",
			want: secrets.ErrNotFound, class: failure.InvalidInput, msg: "404"},
		{name: "404 no mount", source: "vault://kv/data/prod/slack/webhook",
			setup: func(_ *testing.T, f *fixture, _ *Config) {
				f.srv.AddToken(readTok, "", testvault.Policy{Read: []string{"secret/data/prod/*", "kv/data/*"}})
			},
			want: secrets.ErrNotFound, class: failure.InvalidInput},
		{name: "missing key", source: "vault://prod/slack/other",
			want: secrets.ErrNotFound, class: failure.InvalidInput, msg: "no key other"},
		{name: "number value", source: "vault://prod/slack/count",
			want: secrets.ErrNotFound, class: failure.InvalidInput, msg: "holds a number"},
		{name: "object value", source: "vault://prod/slack/nested",
			want: secrets.ErrNotFound, class: failure.InvalidInput, msg: "holds a object"},
		{name: "503 sealed", source: "vault://prod/slack/webhook",
			setup: func(_ *testing.T, f *fixture, _ *Config) { f.srv.FailWith(503) },
			want:  secrets.ErrUnavailable, class: failure.SecretUnavailable, msg: "503"},
		{name: "500", source: "vault://prod/slack/webhook",
			setup: func(_ *testing.T, f *fixture, _ *Config) { f.srv.FailWith(500) },
			want:  secrets.ErrUnavailable, class: failure.SecretUnavailable},
		{name: "429", source: "vault://prod/slack/webhook",
			setup: func(_ *testing.T, f *fixture, _ *Config) { f.srv.FailWith(429) },
			want:  secrets.ErrUnavailable, class: failure.SecretUnavailable},
		{name: "unreachable", source: "vault://prod/slack/webhook",
			setup: func(_ *testing.T, f *fixture, _ *Config) { f.srv.Close() },
			want:  secrets.ErrUnavailable, class: failure.SecretUnavailable, msg: "connection refused"},
		{name: "timeout", source: "vault://prod/slack/webhook",
			setup: func(_ *testing.T, f *fixture, cfg *Config) {
				f.srv.Hang(true)
				cfg.Timeout = 200 * time.Millisecond
			},
			want: secrets.ErrUnavailable, class: failure.SecretUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, true)
			cfg := f.config()
			if tc.setup != nil {
				tc.setup(t, f, &cfg)
			}
			v := newVault(t, cfg)
			got, err := sources(v, "prod", "admin", "kv/data").Resolve(t.Context(), tc.source)
			require.Empty(t, got)
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, tc.class, failure.SecretType(&secrets.Error{Name: "s", Source: tc.source, Err: err}))
			require.Contains(t, err.Error(), tc.source, "the error names the source")
			if tc.msg != "" {
				require.Contains(t, err.Error(), tc.msg)
			}
			for _, never := range []string{webhook, "vaultkvS3cretHook", "12345", "nestedS3cret", "dbPassw0rd", readTok} {
				require.NotContains(t, err.Error(), never)
			}
		})
	}
}

// TestTokenFileVanishes: a token file that cannot be re-read is the
// store's setup failing (SecretUnavailable, retried), not the step.
func TestTokenFileVanishes(t *testing.T) {
	f := newFixture(t, false)
	v := newVault(t, f.config())
	require.NoError(t, os.Remove(f.tokenFile))
	_, err := v.Read(t.Context(), secrets.VaultRef{Mount: "secret", Path: "prod/slack", Key: "webhook"})
	require.ErrorIs(t, err, secrets.ErrUnavailable)
	require.Empty(t, f.srv.Requests())
}

// TestCanceled: the attempt's own cancellation is not a Vault failure.
func TestCanceled(t *testing.T) {
	f := newFixture(t, false)
	f.srv.Hang(true)
	v := newVault(t, f.config())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := v.Read(ctx, secrets.VaultRef{Mount: "secret", Path: "prod/slack", Key: "webhook"})
		done <- err
	}()
	require.Eventually(t, func() bool { return f.srv.Waiting() > 0 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.Is(err, secrets.ErrUnavailable))
}

// TestPolicyBeforeRequest: sources the allow-list refuses, including
// traversal and encoded spellings, never reach Vault.
func TestPolicyBeforeRequest(t *testing.T) {
	f := newFixture(t, false)
	s := sources(newVault(t, f.config()), "prod/slack")
	for _, src := range []string{
		"vault://admin/x/key",
		"vault://secret/data/admin/x",
		"vault://sys/data/policy/x",
		"vault://prod/../admin/x",
		"vault://secret/data/../../sys/x",
		"vault://prod/%2e%2e/admin/x",
		"vault://prod/%2E%2E/admin/x",
		"vault://prod/..%2fadmin/x",
		"vault://prod/slack/webhook?version=1",
		"vault://prod/slackers/key",
	} {
		t.Run(src, func(t *testing.T) {
			_, err := s.Resolve(t.Context(), src)
			require.Error(t, err)
			require.True(t, errors.Is(err, secrets.ErrNotAllowed) || errors.Is(err, secrets.ErrInvalidSource), "%v", err)
		})
	}
	require.Empty(t, f.srv.Requests(), "a refused source reached Vault")
}

func TestResponseTooLarge(t *testing.T) {
	f := newFixture(t, false)
	f.srv.Put("", "secret", "prod/big", map[string]any{"key": strings.Repeat("x", maxResponseBytes+1)})
	_, err := newVault(t, f.config()).Read(t.Context(), secrets.VaultRef{Mount: "secret", Path: "prod/big", Key: "key"})
	require.ErrorIs(t, err, secrets.ErrUnavailable)
	require.NotContains(t, err.Error(), "xxxxxxxx")
}

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(good, []byte("hvs.abc\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	spaced := filepath.Join(dir, "spaced")
	require.NoError(t, os.WriteFile(spaced, []byte("hvs.abc def-SECRETPART\n"), 0o600))
	worldWritable := filepath.Join(dir, "ww")
	require.NoError(t, os.WriteFile(worldWritable, []byte("hvs.abc"), 0o600))
	require.NoError(t, os.Chmod(worldWritable, 0o666))
	badCA := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(badCA, []byte("not pem"), 0o600))
	ar := &AppRole{RoleIDFile: good, SecretIDFile: good}

	tests := []struct {
		name string
		cfg  Config
		msg  string // "" = valid
	}{
		{name: "token file", cfg: Config{Addr: "https://vault.internal:8200", TokenFile: good}},
		{name: "approle", cfg: Config{Addr: "https://vault.internal:8200/", AppRole: ar, Namespace: "team-a/prod"}},
		{name: "token", cfg: Config{Addr: "http://127.0.0.1:8200", Token: "hvs.x"}},
		{name: "no addr", cfg: Config{TokenFile: good}, msg: "vault address"},
		{name: "bad scheme", cfg: Config{Addr: "ftp://vault", TokenFile: good}, msg: "vault address"},
		{name: "path in addr", cfg: Config{Addr: "https://vault/v1/secret", TokenFile: good}, msg: "vault address"},
		{name: "user in addr", cfg: Config{Addr: "https://u:p@vault", TokenFile: good}, msg: "vault address"},
		{name: "no credential", cfg: Config{Addr: "https://vault"}, msg: "no credential"},
		{name: "two credentials", cfg: Config{Addr: "https://vault", TokenFile: good, AppRole: ar}, msg: "two credentials"},
		{name: "half approle", cfg: Config{Addr: "https://vault", AppRole: &AppRole{RoleIDFile: good}}, msg: "needs both"},
		{name: "missing token file", cfg: Config{Addr: "https://vault", TokenFile: filepath.Join(dir, "nope")}, msg: "no such file"},
		{name: "empty token file", cfg: Config{Addr: "https://vault", TokenFile: empty}, msg: "empty"},
		{name: "token file with spaces", cfg: Config{Addr: "https://vault", TokenFile: spaced}, msg: "without spaces"},
		{name: "world-writable token file", cfg: Config{Addr: "https://vault", TokenFile: worldWritable}, msg: "writable by anyone"},
		{name: "token file is a directory", cfg: Config{Addr: "https://vault", TokenFile: dir}, msg: "not a regular file"},
		{name: "bad CA", cfg: Config{Addr: "https://vault", TokenFile: good, CACert: badCA}, msg: "no PEM certificate"},
		{name: "missing CA", cfg: Config{Addr: "https://vault", TokenFile: good, CACert: filepath.Join(dir, "nope.pem")}, msg: "CA certificate"},
		{name: "bad namespace", cfg: Config{Addr: "https://vault", TokenFile: good, Namespace: "a b"}, msg: "namespace"},
		{name: "bad VAULT_TOKEN", cfg: Config{Addr: "https://vault", Token: "a b"}, msg: "VAULT_TOKEN"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Check()
			if tc.msg == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.msg)
			require.NotContains(t, err.Error(), "SECRETPART")
		})
	}
}
