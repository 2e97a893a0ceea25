package worker

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/testvault"
	"github.com/agentflow/agentflow/internal/vaultkv"
)

// TestSecretResolver: --vault-addr picks Vault, --dev-vault-dir the
// directory, both is refused; the KV mount reaches the mapping.
func TestSecretResolver(t *testing.T) {
	srv := testvault.Start(t, testvault.Options{TLS: true})
	srv.Put("", "kv", "prod/slack", map[string]any{"webhook": "from-vault"})
	srv.AddToken("hvs.worker", "", testvault.Policy{Read: []string{"kv/data/prod/*"}})
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("hvs.worker"), 0o600))
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "prod", "slack"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prod", "slack", "webhook"), []byte("from-dir"), 0o600))
	vc := &vaultkv.Config{Addr: srv.URL, CACert: srv.CACertFile, TokenFile: tokenFile}
	policy := secrets.Policy{VaultPrefixes: []string{"prod/slack"}}
	log := slog.New(slog.DiscardHandler)

	tests := []struct {
		name    string
		cfg     Config
		want    string
		wantErr string
	}{
		{name: "vault", cfg: Config{SecretPolicy: policy, Vault: vc, VaultKVMount: "kv"}, want: "from-vault"},
		{name: "dev dir", cfg: Config{SecretPolicy: policy, DevVaultDir: dir}, want: "from-dir"},
		{name: "none", cfg: Config{SecretPolicy: policy}, wantErr: "no vault configured"},
		{name: "both", cfg: Config{SecretPolicy: policy, Vault: vc, DevVaultDir: dir}, wantErr: "two vaults"},
		{name: "bad mount", cfg: Config{SecretPolicy: policy, DevVaultDir: dir, VaultKVMount: "a/b"}, wantErr: "KV mount"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := secretResolver(tc.cfg, log)
			if err == nil {
				var got string
				got, err = r.Resolve(t.Context(), "vault://prod/slack/webhook")
				if tc.wantErr == "" {
					require.NoError(t, err)
					require.Equal(t, tc.want, got)
					return
				}
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
	require.Equal(t, []string{"hvs.worker"}, srv.TokensSeen())
}
