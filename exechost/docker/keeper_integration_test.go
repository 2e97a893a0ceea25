//go:build integration

package docker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/exechost/docker/policy"
)

// Environment of the abandoned-worker child process.
const (
	abandonExecEnv   = "AGENTFLOW_TEST_ABANDON_EXECUTION"
	abandonReportEnv = "AGENTFLOW_TEST_ABANDON_REPORT"
	keeperRuntime    = 45 * time.Second // room for a slow provision and exec on a loaded machine
)

// TestKeeperHoldsDeadlineWithoutWorker: a hostile tool tries every way we
// know at PID 1 (all signals by four system calls, ptrace, /proc/1/mem and
// friends, process_vm_*, scheduling and limits, kill -1), then the worker
// process dies without terminating anything. The container must still be
// gone after its runtime: the in-container deadline alone removes it.
func TestKeeperHoldsDeadlineWithoutWorker(t *testing.T) {
	if id := os.Getenv(abandonExecEnv); id != "" {
		abandonedWorker(t, exechost.ExecutionID(id), os.Getenv(abandonReportEnv))
		return
	}
	e := setup(t)
	imageID(t, e.c, probeTag(t)) // present, or fail with the hint
	id := newID(t)
	t.Cleanup(func() { // only if the deadline did not hold
		for _, c := range e.containersOf(t, id) {
			_ = e.c.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
		}
	})
	report := filepath.Join(t.TempDir(), "report.json")

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestKeeperHoldsDeadlineWithoutWorker$", "-test.count", "1")
	cmd.Env = append(os.Environ(), abandonExecEnv+"="+string(id), abandonReportEnv+"="+report)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "abandoned worker: %s", out)

	b, err := os.ReadFile(report)
	require.NoError(t, err, "abandoned worker wrote no report: %s", out)
	var rs []probeResult
	require.NoError(t, json.Unmarshal(b, &rs))
	require.GreaterOrEqual(t, len(rs), 40, "the probe tries at least 40 ways at PID 1")
	var holes []string
	var state string
	for _, r := range rs {
		switch {
		case r.Name == "keeper_state":
			state = r.Detail
		case r.Errno == "":
			holes = append(holes, fmt.Sprintf("%s (%s)", r.Name, r.Detail))
		}
	}
	require.Empty(t, holes, "attempts at PID 1 the kernel accepted")
	require.Contains(t, state, "uid=65533", "PID 1 runs as the keeper")
	require.Contains(t, state, "tracer=0")
	require.Regexp(t, `^state=[SR] `, state, "keeper not stopped or traced")

	// The worker is gone (the child exited without Terminate and its host
	// timer died with it). Poll generously: only "gone eventually" counts.
	require.NotEmpty(t, e.containersOf(t, id), "sandbox still running after the worker died")
	limit := time.Now().Add(keeperRuntime + 2*time.Minute)
	for len(e.containersOf(t, id)) > 0 {
		require.True(t, time.Now().Before(limit), "sandbox outlived its deadline with no worker alive")
		time.Sleep(time.Second)
	}
}

// abandonedWorker is the child: it provisions, lets the probe attack PID 1,
// writes the report and exits without Terminate or cleanup.
func abandonedWorker(t *testing.T, id exechost.ExecutionID, report string) {
	c := dockerClient(t)
	store, err := checkpoint.NewLocal(t.TempDir())
	require.NoError(t, err)
	h, err := docker.New(docker.Options{Client: c, Store: store, KillGrace: time.Second})
	require.NoError(t, err)
	r := limits()
	r.Runtime = keeperRuntime
	img := imageID(t, c, probeTag(t))
	_, err = h.Provision(t.Context(), exechost.ProvisionRequest{ExecutionID: id, Image: img, Resources: r,
		Network: exechost.NetworkNone, Labels: map[string]string{"agentflow.test": "1", "agentflow.test.suite": "abandoned"}})
	require.NoError(t, err)
	res, err := h.Exec(t.Context(), id, exechost.ExecRequest{Command: []string{"/bin/tool", "pid1"}, Timeout: 40 * time.Second})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stderr %s", res.Stderr)
	var out struct {
		Results []probeResult `json:"results"`
	}
	require.NoError(t, json.Unmarshal(res.Stdout, &out), "%s", res.Stdout)
	b, _ := json.Marshal(out.Results)
	require.NoError(t, os.WriteFile(report, b, 0o600))
	os.Exit(0) // the worker dies: no Terminate, no cleanup, no host timer
}

// TestKeeperIsNotTheToolUser: PID 1's uid differs from every exec's, and
// a tool configured with the keeper's uid is refused.
func TestKeeperIsNotTheToolUser(t *testing.T) {
	e := setup(t)
	x, _ := e.provision(t, nil)
	res := e.sh(t, x.ExecutionID, `grep '^Uid:' /proc/1/status; grep '^Uid:' /proc/self/status; kill -STOP 1; echo "kill=$?"`)
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	require.Len(t, lines, 3, "stdout %q stderr %q", res.Stdout, res.Stderr)
	require.Equal(t, []string{"Uid:", "65533", "65533", "65533", "65533"}, strings.Fields(lines[0]))
	require.Equal(t, []string{"Uid:", "65532", "65532", "65532", "65532"}, strings.Fields(lines[1]))
	require.Equal(t, "kill=1", lines[2], "the tool cannot stop PID 1")

	_, err := docker.New(docker.Options{Client: e.c, Store: e.store, Policy: policy.Config{User: policy.KeeperUser}})
	require.Error(t, err)
}
