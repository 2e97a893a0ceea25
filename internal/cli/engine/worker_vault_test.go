package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/vaultkv"
	"github.com/agentflow/agentflow/worker"
)

// clearVaultEnv: the operator's own VAULT_* must not leak into the test.
func clearVaultEnv(t *testing.T) {
	for _, k := range []string{"VAULT_ADDR", "VAULT_TOKEN", "VAULT_NAMESPACE", "VAULT_CACERT", "AGENTFLOW_DEV_VAULT_DIR", "AGENTFLOW_VAULT_DIR"} {
		t.Setenv(k, "")
		require.NoError(t, os.Unsetenv(k))
	}
}

func parseWorkerFlags(t *testing.T, args ...string) (worker.Config, string, error) {
	t.Helper()
	var f workerFlags
	cmd := &cobra.Command{Use: "worker"}
	f.register(cmd)
	var msgs bytes.Buffer
	cmd.Flags().SetOutput(&msgs)
	require.NoError(t, cmd.Flags().Parse(args))
	cfg, err := f.config(&Options{}, &bytes.Buffer{})
	return cfg, msgs.String(), err
}

func TestWorkerVaultFlags(t *testing.T) {
	clearVaultEnv(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("hvs.flag-test\n"), 0o600))

	t.Run("token file", func(t *testing.T) {
		cfg, _, err := parseWorkerFlags(t, "--vault-addr", "https://vault.internal:8200", "--vault-token-file", tokenFile,
			"--vault-namespace", "team-a", "--vault-kv-mount", "kv")
		require.NoError(t, err)
		require.Equal(t, &vaultkv.Config{Addr: "https://vault.internal:8200", Namespace: "team-a", TokenFile: tokenFile,
			MaxRetries: vaultkv.DefaultMaxRetries}, cfg.Vault)
		require.Equal(t, "kv", cfg.VaultKVMount)
		require.Empty(t, cfg.DevVaultDir)
	})
	t.Run("environment", func(t *testing.T) {
		t.Setenv("VAULT_ADDR", "https://vault.env:8200")
		t.Setenv("VAULT_TOKEN", "hvs.from-env")
		t.Setenv("VAULT_NAMESPACE", "ns-env")
		cfg, _, err := parseWorkerFlags(t)
		require.NoError(t, err)
		require.Equal(t, "https://vault.env:8200", cfg.Vault.Addr)
		require.Equal(t, "hvs.from-env", cfg.Vault.Token)
		require.Equal(t, "ns-env", cfg.Vault.Namespace)
		require.Equal(t, "secret", cfg.VaultKVMount)
	})
	t.Run("approle", func(t *testing.T) {
		t.Setenv("VAULT_TOKEN", "hvs.ignored-when-approle")
		cfg, _, err := parseWorkerFlags(t, "--vault-addr", "https://vault:8200",
			"--vault-approle-role-id-file", tokenFile, "--vault-approle-secret-id-file", tokenFile)
		require.NoError(t, err)
		require.Equal(t, &vaultkv.AppRole{RoleIDFile: tokenFile, SecretIDFile: tokenFile}, cfg.Vault.AppRole)
		require.Empty(t, cfg.Vault.Token)
	})
	t.Run("dev vault dir", func(t *testing.T) {
		cfg, msgs, err := parseWorkerFlags(t, "--dev-vault-dir", dir)
		require.NoError(t, err)
		require.Equal(t, dir, cfg.DevVaultDir)
		require.Nil(t, cfg.Vault)
		require.Empty(t, msgs)
	})
	t.Run("deprecated --vault-dir", func(t *testing.T) {
		cfg, msgs, err := parseWorkerFlags(t, "--vault-dir", dir)
		require.NoError(t, err)
		require.Equal(t, dir, cfg.DevVaultDir)
		require.Contains(t, msgs, "--vault-dir has been deprecated, use --dev-vault-dir")
	})
	t.Run("old environment name", func(t *testing.T) {
		t.Setenv("AGENTFLOW_VAULT_DIR", dir)
		cfg, _, err := parseWorkerFlags(t)
		require.NoError(t, err)
		require.Equal(t, dir, cfg.DevVaultDir)
	})
	t.Run("no vault", func(t *testing.T) {
		cfg, _, err := parseWorkerFlags(t)
		require.NoError(t, err)
		require.Nil(t, cfg.Vault)
		require.Empty(t, cfg.DevVaultDir)
	})
}

// TestWorkerVaultUsageErrors: wrong vault flags are usage errors (exit 2)
// before anything starts, and never print a token.
func TestWorkerVaultUsageErrors(t *testing.T) {
	clearVaultEnv(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("hvs.NEVER-PRINTED\n"), 0o600))
	emptyFile := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(emptyFile, nil, 0o600))
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{name: "two vaults", args: []string{"--vault-addr", "https://v:8200", "--vault-token-file", tokenFile, "--dev-vault-dir", dir}, want: "--vault-addr and --dev-vault-dir are two vaults"},
		{name: "two vaults, address from env", env: map[string]string{"VAULT_ADDR": "https://v:8200", "VAULT_TOKEN": "hvs.x"}, args: []string{"--dev-vault-dir", dir}, want: "VAULT_ADDR (set in the environment) and --dev-vault-dir"},
		{name: "both dir names", args: []string{"--vault-dir", dir, "--dev-vault-dir", dir}, want: "old name of --dev-vault-dir"},
		{name: "no credential", args: []string{"--vault-addr", "https://v:8200"}, want: "no credential"},
		{name: "two credentials", args: []string{"--vault-addr", "https://v:8200", "--vault-token-file", tokenFile, "--vault-approle-role-id-file", tokenFile, "--vault-approle-secret-id-file", tokenFile}, want: "two credentials"},
		{name: "half approle", args: []string{"--vault-addr", "https://v:8200", "--vault-approle-role-id-file", tokenFile}, want: "needs both"},
		{name: "empty token file", args: []string{"--vault-addr", "https://v:8200", "--vault-token-file", emptyFile}, want: "empty"},
		{name: "bad address", args: []string{"--vault-addr", "vault:8200", "--vault-token-file", tokenFile}, want: "vault address"},
		{name: "token file without address", args: []string{"--vault-token-file", tokenFile}, want: "--vault-token-file needs --vault-addr"},
		{name: "namespace without address", args: []string{"--vault-namespace", "x"}, want: "--vault-namespace needs --vault-addr"},
		{name: "bad CA", args: []string{"--vault-addr", "https://v:8200", "--vault-token-file", tokenFile, "--vault-ca-cert", tokenFile}, want: "no PEM certificate"},
		{name: "bad kv mount", args: []string{"--vault-kv-mount", "a/b"}, want: "--vault-kv-mount"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out, errOut bytes.Buffer
			code := Run(context.Background(), "test", append([]string{"worker"}, tc.args...), Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
			require.Equal(t, ExitInvalid, code, errOut.String())
			require.Contains(t, errOut.String(), tc.want)
			require.NotContains(t, errOut.String()+out.String(), "NEVER-PRINTED")
		})
	}
}
