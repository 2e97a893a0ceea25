//go:build e2e

package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/workflows"
)

// TestEngineWorkerKill9 kills a worker (a real `agentctl worker` process)
// in the middle of a step of a spec WITHOUT retries: the attempt is lost,
// Temporal notices through the missing heartbeats, the workflow retries it
// as an infrastructure failure (its own budget, not `retries`), a second
// worker reaps the orphaned sandbox at start and runs the retry, and the
// run ends SUCCEEDED with nothing left behind.
func TestEngineWorkerKill9(t *testing.T) {
	e := startEngine(t)
	root := repoRoot(t)
	bin := filepath.Join(e.tmp, "agentctl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/agentctl")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build agentctl: %s", out)

	queue := fmt.Sprintf("e2e-kill9-%d", time.Now().UnixNano())
	startWorker := func(name string) *exec.Cmd {
		logf, err := os.Create(filepath.Join(e.tmp, name+".log"))
		require.NoError(t, err)
		cmd := exec.Command(bin, "--address", e.address, "worker",
			"--task-queue", queue,
			"--health-addr", "-", "--metrics-addr", "-",
			"--checkpoint-dir", filepath.Join(e.tmp, "checkpoints"),
			"--log-dir", e.logDir,
			"--sandbox-label", "agentflow.test=1",
			"--sandbox-label", "agentflow.e2e="+e.runLabel,
		)
		cmd.Stdout, cmd.Stderr = logf, logf
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			logf.Close()
			if t.Failed() {
				b, _ := os.ReadFile(logf.Name())
				t.Logf("%s log:\n%s", name, b)
			}
		})
		return cmd
	}

	a := startWorker("worker-a")
	id := fmt.Sprintf("e2e-kill9-%d", time.Now().UnixNano()%1_000_000_000)
	s := e.step("slow", "testtool", map[string]any{"mode": "sleep", "seconds": 10})
	run := e.startOn(t, queue, id, plan("e2e-kill9", s), nil)

	// Kill A while the tool runs (not mid-provision): the sandbox is
	// running and /bin/tool shows up in its process list.
	require.Eventually(t, func() bool {
		for _, c := range e.containers(t, id) {
			if c.State != "running" {
				continue
			}
			top, err := e.docker.ContainerTop(t.Context(), c.ID, nil)
			if err != nil {
				continue
			}
			for _, p := range top.Processes {
				if strings.Contains(strings.Join(p, " "), "/bin/tool") {
					return true
				}
			}
		}
		return false
	}, 90*time.Second, 200*time.Millisecond, "worker A never started the tool")
	require.NoError(t, a.Process.Signal(syscall.SIGKILL))
	_ = a.Wait()

	b := startWorker("worker-b")
	res, err := e.wait(t, run)
	require.NoError(t, err)
	require.Equal(t, workflows.RunSucceeded, res.Status)
	r := stepRecord(t, e.status(t, id), "slow")
	require.Equal(t, workflows.StepSuccess, r.Status)
	require.GreaterOrEqual(t, r.Attempts, int32(2), "the killed attempt must count")
	require.Len(t, r.AttemptHistory, int(r.Attempts))
	lost, last := r.AttemptHistory[0], r.AttemptHistory[len(r.AttemptHistory)-1]
	require.Equal(t, workflows.ClassInfrastructure, lost.Class, "attempt 1: %+v", lost)
	require.Equal(t, failure.WorkerLost, lost.Type, "attempt 1: %+v", lost)
	require.Contains(t, lost.Error, "Heartbeat")
	require.True(t, strings.HasPrefix(lost.Worker, fmt.Sprintf("%d@", a.Process.Pid)),
		"the lost attempt names the killed worker (from its last heartbeat): %q", lost.Worker)
	require.Equal(t, workflows.AttemptSuccess, last.Status)
	require.NotEmpty(t, last.Worker, "the attempt that finished names its worker")
	e.requireNoContainers(t, id)

	// Graceful stop of B: SIGTERM, exit 0.
	require.NoError(t, b.Process.Signal(syscall.SIGTERM))
	require.NoError(t, b.Wait())

	// A's sandbox (owner gone) is reaped: by B at its start, or by any
	// other worker on this daemon whose reaper ran first (every worker
	// reaps sandboxes whose owner is dead, and other test packages start
	// workers on the same daemon), so which one did it is not asserted;
	// requireNoContainers above is. exechost/docker's TestReaper pins the
	// reaper itself.
	blog, err := os.ReadFile(filepath.Join(e.tmp, "worker-b.log"))
	require.NoError(t, err)
	require.Contains(t, string(blog), `msg="worker stopped"`)
}
