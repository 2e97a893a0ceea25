//go:build e2e

package tests

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The lean agentctl (what `make build` installs) answers validate/graph
// itself and hands every engine verb to agentctl-engine by exec, keeping
// arguments, output and the exit code.
func TestLeanAgentctlForwardsEngineVerbs(t *testing.T) {
	dir := t.TempDir()
	lean, engine := filepath.Join(dir, "agentctl"), filepath.Join(dir, "agentctl-engine")
	for _, b := range []struct{ out, pkg string }{{lean, "./cmd/agentctl-lean"}, {engine, "./cmd/agentctl"}} {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "build %s: %s", b.out, out)
	}
	run := func(bin string, args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = repoRoot(t)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		require.NoError(t, err)
		return 0, string(out)
	}

	code, out := run(lean, "validate", "-f", "specs/demo.yaml")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "valid (demo-news-digest")

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("name: x\nsteps: []\n"), 0o600))
	code, out = run(lean, "validate", "-f", bad)
	require.Equal(t, 2, code, out)

	// One help text: the lean binary's top-level help is the engine's.
	code, leanHelp := run(lean, "--help")
	require.Equal(t, 0, code, leanHelp)
	code, engineHelp := run(engine, "--help")
	require.Equal(t, 0, code, engineHelp)
	require.Equal(t, engineHelp, leanHelp)

	// Forwarded: the engine's own help text and its exit codes.
	code, out = run(lean, "logs", "--help")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "--attempt")
	code, out = run(lean, "--address", "127.0.0.1:1", "list")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "cannot reach Temporal at 127.0.0.1:1")
	code, out = run(lean, "resume")
	require.Equal(t, 2, code, out)

	require.NoError(t, os.Remove(engine))
	code, out = run(lean, "list")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "needs agentctl-engine next to agentctl")
}
