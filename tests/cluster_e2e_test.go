//go:build e2e

package tests

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/testenv"
	"github.com/agentflow/agentflow/workflows"
)

// TestProductionCluster: the full Temporal server (not the dev server) on
// PostgreSQL, its frontend requiring mutual TLS. agentctl with a wrong CA
// or in plaintext fails with exit 1 naming TLS; `agentctl setup
// --create-namespace` creates the namespace and registers what the cluster
// lacks, and again changes nothing; two workers sharing a
// store run the `make run` demo (scripts/demo.sh: tool registration, then
// specs/demo.yaml) to SUCCEEDED, every client and worker over mutual TLS.
func TestProductionCluster(t *testing.T) {
	testenv.Docker(t)
	pg := testenv.Postgres(t)
	pki := testenv.NewPKI(t, "temporal.test")
	srv := testenv.StartTemporalServer(t, pg, testenv.TemporalServerOptions{MTLS: true, PKI: pki})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("temporal server log:\n%s", srv.Log())
		}
	})
	bin := sharedAgentctl(t)
	tmp := t.TempDir()
	mtls := []string{"TEMPORAL_ADDRESS=" + srv.Address, "TEMPORAL_TLS_CA_PATH=" + pki.CAFile,
		"TEMPORAL_TLS_CERT_PATH=" + pki.ClientCert, "TEMPORAL_TLS_KEY_PATH=" + pki.ClientKey,
		"TEMPORAL_TLS_SERVER_NAME=" + pki.ServerName}
	agentctl := func(env []string, args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String()
		}
		require.NoError(t, err)
		return 0, out.String()
	}

	t.Run("wrong CA", func(t *testing.T) {
		code, out := agentctl(append(append([]string{}, mtls...), "TEMPORAL_TLS_CA_PATH="+pki.OtherCAFile), "list")
		require.Equal(t, 1, code, out)
		require.Contains(t, out, "TLS")
	})
	t.Run("plaintext", func(t *testing.T) {
		code, out := agentctl([]string{"TEMPORAL_ADDRESS=" + srv.Address}, "list")
		require.Equal(t, 1, code, out)
		require.Contains(t, out, "--tls")
	})

	// A fresh cluster has no namespace at all (the dev server makes
	// "default" itself): setup says how, then does it when asked.
	code, out := agentctl(mtls, "setup")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "--create-namespace")
	code, out = agentctl(mtls, "setup", "--create-namespace")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "namespace default: created")
	for _, sa := range workflows.SearchAttributes {
		require.Contains(t, out, "search attribute "+sa+" (Keyword): added")
	}
	code, out = agentctl(mtls, "setup")
	require.Equal(t, 0, code, out)
	require.NotContains(t, out, "added", "setup twice changes nothing")

	// Two workers on one shared store (any worker may run any step).
	keyFile := filepath.Join(tmp, "shared.key")
	require.NoError(t, os.WriteFile(keyFile, []byte("k1 "+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))+"\n"), 0o600))
	store := "file://" + filepath.Join(tmp, "store")
	label := fmt.Sprintf("cluster-%d", time.Now().UnixNano())
	for i := range 2 {
		logPath := filepath.Join(tmp, fmt.Sprintf("worker-%d.log", i))
		logf, err := os.Create(logPath)
		require.NoError(t, err)
		cmd := exec.Command(bin, "worker", "--store", store, "--checkpoint-key-file", keyFile,
			"--health-addr", "-", "--metrics-addr", "-", "--gpu-policy", "ignore",
			"--sandbox-label", "agentflow.test=1", "--sandbox-label", "agentflow.e2e="+label)
		cmd.Env = append(os.Environ(), mtls...)
		cmd.Stdout, cmd.Stderr = logf, logf
		require.NoError(t, cmd.Start())
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(45 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			logf.Close()
			if t.Failed() {
				b, _ := os.ReadFile(logPath)
				t.Logf("worker %d log:\n%s", i, b)
			}
		})
		require.Eventually(t, func() bool {
			b, _ := os.ReadFile(logPath)
			return bytes.Contains(b, []byte(`msg="worker started"`))
		}, 2*time.Minute, 200*time.Millisecond, "worker %d did not start", i)
	}

	demo := exec.Command("bash", "scripts/demo.sh")
	demo.Dir = repoRoot(t)
	demo.Env = append(append(os.Environ(), mtls...), "AGENTCTL_BIN="+bin,
		"AGENTFLOW_IMAGES="+filepath.Join(repoRoot(t), ".data", "images.json"))
	var dout bytes.Buffer
	demo.Stdout, demo.Stderr = &dout, &dout
	err := demo.Run()
	require.NoError(t, err, "scripts/demo.sh:\n%s", dout.String())
	require.Contains(t, dout.String(), "SUCCEEDED")
	require.False(t, strings.Contains(dout.String(), "FAILED"), dout.String())
}
