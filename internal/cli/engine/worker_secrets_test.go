package engine

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/secrets"
)

// TestWorkerSecretAndRuntimeFlags: the allow-list flags reach
// worker.Config; a bad policy is a usage error before anything starts.
func TestWorkerSecretAndRuntimeFlags(t *testing.T) {
	root := t.TempDir()
	var f workerFlags
	cmd := &cobra.Command{Use: "worker"}
	f.register(cmd)
	require.NoError(t, cmd.Flags().Parse([]string{
		"--secret-env-allow", "SLACK_*", "--secret-env-allow", "API_KEY",
		"--secret-file-root", root, "--secret-vault-prefix", "prod/slack", "--runtime", "runsc",
	}))
	cfg, err := f.config(&Options{}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, secrets.Policy{EnvAllow: []string{"SLACK_*", "API_KEY"}, FileRoots: []string{root}, VaultPrefixes: []string{"prod/slack"}}, cfg.SecretPolicy)
	require.Equal(t, "runsc", cfg.Runtime)

	var none workerFlags
	none.register(&cobra.Command{Use: "worker"})
	cfg, err = none.config(&Options{}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, secrets.Policy{}, cfg.SecretPolicy, "nothing is allowed by default")

	for _, args := range [][]string{
		{"worker", "--secret-file-root", "/proc"},
		{"worker", "--secret-file-root", "/"},
		{"worker", "--secret-file-root", "relative"},
		{"worker", "--secret-env-allow", "["},
		{"worker", "--secret-vault-prefix", "a/../b"},
	} {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), "test", args, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
		require.Equal(t, ExitInvalid, code, "%v: %s", args, errOut.String())
		require.Contains(t, errOut.String(), "--secret-", "%v", args)
	}
}
