package activities

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/internal/secrets"
)

// TestRunStepRefusedSecretIsPolicyViolation: a secret source the worker's
// policy refuses fails the attempt before any sandbox exists, as a
// non-retryable PolicyViolation naming the secret, its source and the flag
// the operator sets, never a value; the worker logs the refusal.
func TestRunStepRefusedSecretIsPolicyViolation(t *testing.T) {
	const value = "refused-V4lue-must-not-leak"
	t.Setenv("AF_POLICY_VALUE", value)
	t.Setenv("TEMPORAL_TLS_KEY", value)
	root := t.TempDir()
	cases := []struct {
		source, flag string
	}{
		{"env://AF_POLICY_VALUE", "--secret-env-allow"},     // exists, not allowed
		{"env://TEMPORAL_TLS_KEY", "worker setting"},        // never, whatever the policy
		{"file:///proc/self/environ", "/proc"},              // never
		{"file:///etc/hostname", "--secret-file-root"},      // not under a root
		{"vault://admin/root/key", "--secret-vault-prefix"}, // not under a prefix
		{"file://" + filepath.Join(root, "x"), "--secret-file-root"},
	}
	for _, tc := range cases {
		t.Run(tc.source, func(t *testing.T) {
			h := newHarness(t)
			var logBuf bytes.Buffer
			h.opts.Logger = slog.New(slog.NewTextHandler(&logBuf, nil))
			h.opts.Secrets = &secrets.Sources{
				Policy: secrets.Policy{EnvAllow: []string{"AF_OTHER_*", "*TLS*"}, VaultPrefixes: []string{"prod"}},
				Vault:  secrets.DirVault{Dir: t.TempDir()},
			}
			req := baseReq()
			req.SecretSources = map[string]string{"tok": tc.source}
			req.Input = map[string]any{"token": "{{ .secrets.tok }}"}

			_, err := h.run(t, req)
			require.Error(t, err)
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "%v", err)
			require.Equal(t, ErrTypePolicy, appErr.Type())
			require.True(t, appErr.NonRetryable())
			require.Contains(t, appErr.Error(), "secret tok ("+tc.source+")")
			require.Contains(t, appErr.Error(), tc.flag)
			require.NotContains(t, appErr.Error(), value)

			provisions, _, _, _, _ := h.host.snapshot()
			require.Empty(t, provisions, "no sandbox for a step whose secret is refused")

			logged := logBuf.String()
			require.Contains(t, logged, "secret source refused by the worker's policy")
			require.Contains(t, logged, tc.source)
			require.NotContains(t, logged, value)
		})
	}
}

// errResolver fails every secret with err.
type errResolver struct{ err error }

func (r errResolver) Resolve(context.Context, string) (string, error) { return "", r.err }

// TestRunStepSecretStoreClasses: a Vault that cannot answer fails the
// attempt as SecretUnavailable (infrastructure, retried); one that denies
// the worker is a PolicyViolation; a missing secret InvalidInput. No
// sandbox is provisioned in any case.
func TestRunStepSecretStoreClasses(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantType  string
		retryable bool
	}{
		{"unavailable", fmt.Errorf("vault://prod/x/k: %w: GET secret/data/prod/x: 503", secrets.ErrUnavailable), failure.SecretUnavailable, true},
		{"denied", fmt.Errorf("vault://prod/x/k: %w: 403 permission denied", secrets.ErrDenied), ErrTypePolicy, false},
		{"not found", fmt.Errorf("vault://prod/x/k: %w: 404", secrets.ErrNotFound), ErrTypeInvalidInput, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.opts.Secrets = errResolver{err: tc.err}
			req := baseReq()
			req.SecretSources = map[string]string{"tok": "vault://prod/x/k"}
			req.Input = map[string]any{"token": "{{ .secrets.tok }}"}
			_, err := h.run(t, req)
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			require.Equal(t, tc.wantType, appErr.Type())
			require.Equal(t, !tc.retryable, appErr.NonRetryable())
			require.Equal(t, tc.retryable, failure.Infrastructure(appErr.Type()))
			require.Contains(t, appErr.Error(), "secret tok (vault://prod/x/k)")
			provisions, _, _, _, _ := h.host.snapshot()
			require.Empty(t, provisions)
		})
	}
}
