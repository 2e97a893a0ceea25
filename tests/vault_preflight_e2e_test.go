//go:build e2e

package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/testvault"
)

// TestDryRunVaultToken: `run --dry-run` asks a worker whose secrets come
// from a KV v2 server (internal/testvault, over TLS): with a token Vault
// refuses, the dry run exits 2 naming the secret; with the right token it
// exits 0. Neither the secret's value nor a token is ever printed, and the
// server saw the worker's token (the check really went to Vault).
func TestDryRunVaultToken(t *testing.T) {
	e := startEngine(t)
	const (
		value = "https://hooks.example.test/services/T0/B0/dry-run-secret-value"
		good  = "hvs.dry-run-good-token"
		wrong = "hvs.dry-run-wrong-token"
	)
	srv := testvault.Start(t, testvault.Options{TLS: true})
	srv.Put("", "secret", "prod/app", map[string]any{"token": value})
	srv.AddToken(good, "", testvault.Policy{Read: []string{"secret/data/prod/app"}})
	tokenFile := filepath.Join(t.TempDir(), "vault-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(wrong+"\n"), 0o600))
	queue, _ := e.startWorkerProcess(t, "vault-dry", "--vault-addr", srv.URL, "--vault-token-file", tokenFile,
		"--vault-ca-cert", srv.CACertFile, "--secret-vault-prefix", "prod/app")

	specFile := filepath.Join(t.TempDir(), "vault-dry.yaml")
	require.NoError(t, os.WriteFile(specFile, []byte(`name: e2e-vault-dry
version: "1.0.0"
secrets:
  - name: app_token
    source: vault://prod/app/token
steps:
  - id: call
    image: `+e.images["testtool"]+`
    inputs: {mode: ok, token: "{{ .secrets.app_token }}"}
`), 0o600))
	dryRun := func() (int, string) {
		var out bytes.Buffer
		cmd := exec.Command(filepath.Join(e.tmp, "agentctl"), "--address", e.address, "run", "-f", specFile,
			"--dry-run", "--task-queue", queue)
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String()
		}
		require.NoError(t, err)
		return 0, out.String()
	}
	noLeak := func(out string) {
		for _, s := range []string{value, good, wrong} {
			require.NotContains(t, out, s)
		}
	}

	code, out := dryRun()
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "app_token")
	require.Regexp(t, `FAIL\s+secret\s+step call\s+app_token \(vault\)`, out)
	noLeak(out)
	require.Contains(t, srv.TokensSeen(), wrong, "the worker asked Vault")

	require.NoError(t, os.WriteFile(tokenFile, []byte(good+"\n"), 0o600))
	code, out = dryRun()
	require.Equal(t, 0, code, out)
	require.Regexp(t, `ok\s+secret\s+step call\s+app_token \(vault\)`, out)
	require.False(t, strings.Contains(out, "FAIL"), out)
	noLeak(out)
	require.Contains(t, srv.TokensSeen(), good)
}
