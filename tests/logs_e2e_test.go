//go:build e2e

package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost/docker/policy"
	"github.com/agentflow/agentflow/exechost/docker/runner"
	"github.com/agentflow/agentflow/internal/logstore"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/testenv"
	"github.com/agentflow/agentflow/worker"
	"github.com/agentflow/agentflow/workflows"
)

// TestLogsFollowShowsARunningStep: `agentctl logs -f`, a separate process
// that only shares the log store with the worker, prints a running step's
// first stderr line while the tool is still running, then the rest, and
// exits when the run closes. The tool (testtool trickle) cannot finish
// before the test creates its gate file, and the test does that only after
// the follower printed line 1: the order is forced, not timed.
func TestLogsFollowShowsARunningStep(t *testing.T) {
	e := startEngine(t)
	followRunningStep(t, e, []string{"--log-dir", e.logDir}, nil)
}

// TestLogsFollowFromS3: the same with the worker on a shared MinIO store
// (--store): the follower reads the bucket only, as on a third machine.
func TestLogsFollowFromS3(t *testing.T) {
	srv := testenv.MinIO(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v) // the in-process worker reads the AWS variables
	}
	keyFile := filepath.Join(t.TempDir(), "shared.key")
	require.NoError(t, os.WriteFile(keyFile, []byte("k1 "+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))+"\n"), 0o600))
	url := srv.StoreURL("e2e-logs")
	e := startEngineWith(t, func(c *worker.Config) { c.Store, c.CheckpointKeyFile = url, keyFile })
	followRunningStep(t, e, []string{"--store", url}, srv.Env())

	// The log is in the bucket, not in the worker's local log directory.
	root, err := objstore.Open(t.Context(), url, srv.Getenv)
	require.NoError(t, err)
	infos, err := root.List(t.Context(), logstore.Prefix+"/")
	require.NoError(t, err)
	require.NotEmpty(t, infos)
	_, err = os.Stat(e.logDir)
	require.True(t, os.IsNotExist(err), "nothing in the local log directory: %v", err)
}

// followRunningStep runs a trickle step and an `agentctl logs -f` process
// with storeArgs (and extra environment), and checks the follower shows
// line 1 while the tool cannot have finished.
func followRunningStep(t *testing.T, e *engineEnv, storeArgs, env []string) {
	root := repoRoot(t)
	bin := filepath.Join(e.tmp, "agentctl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/agentctl")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build agentctl: %s", out)

	id := fmt.Sprintf("e2e-logs-follow-%d", time.Now().UnixNano()%1_000_000_000)
	s := e.step("live", "testtool", map[string]any{"mode": "trickle", "lines": 3, "seconds": 0, "message": "e2e-live", "gate": "gate"})
	run := e.start(t, id, plan("e2e-logs-follow", s), nil)

	// The follower: its own process, reading the store the worker writes.
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	args := append([]string{"--address", e.address, "logs", id, "--step", "live", "-f", "--poll-interval", "200ms"}, storeArgs...)
	follow := exec.CommandContext(ctx, bin, args...)
	follow.Env = append(append(os.Environ(), "AGENTFLOW_STORE="), env...) // only the flags choose the store
	stdout, err := follow.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	follow.Stderr = &stderr
	require.NoError(t, follow.Start())
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var printed []string
	waitFor := func(want string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				require.True(t, ok, "agentctl logs -f ended before printing %q; printed %q; stderr %s", want, printed, stderr.String())
				printed = append(printed, l)
				if strings.Contains(l, want) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("agentctl logs -f did not print %q; printed %q", want, printed)
			}
		}
	}

	waitFor("e2e-live line 1/3")
	// The tool is blocked on its gate: the step is running.
	require.Equal(t, workflows.StepRunning, stepRecord(t, e.status(t, id), "live").Status)
	require.NotContains(t, strings.Join(printed, "\n"), "line 2/3")

	// Open the gate inside the sandbox, behind the engine's back.
	var sandbox string
	for _, c := range e.containers(t, id) {
		if c.State == "running" {
			sandbox = c.ID
		}
	}
	require.NotEmpty(t, sandbox, "the running step's sandbox")
	res, err := runner.New(e.docker, runner.Options{}).Run(ctx, sandbox, runner.Command{
		Argv: []string{"touch", policy.WorkspaceDir + "/gate"}, User: policy.DefaultUser, WorkDir: policy.WorkspaceDir,
		MaxOutput: 1 << 10, Timeout: 30 * time.Second,
	})
	require.NoError(t, err)
	require.Zero(t, res.ExitCode)

	waitFor("e2e-live line 3/3")
	_, err = e.wait(t, run)
	require.NoError(t, err)
	// The follower ends by itself once the run has closed.
	for l := range lines {
		printed = append(printed, l)
	}
	require.NoError(t, follow.Wait(), "stderr: %s", stderr.String())
	all := strings.Join(printed, "\n")
	require.Equal(t, 1, strings.Count(all, "==> live attempt 1"), all)
	i1, i2, i3 := strings.Index(all, "line 1/3"), strings.Index(all, "line 2/3"), strings.Index(all, "line 3/3")
	require.True(t, i1 >= 0 && i1 < i2 && i2 < i3, "lines in order:\n%s", all)
	e.requireNoContainers(t, id)
}
