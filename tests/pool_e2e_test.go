//go:build e2e

package tests

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/workflows"
)

// TestWarmPoolE2E runs a chain through a worker process started with
// --warm-pool: the steps are served by pre-started sandboxes (the worker's
// debug log says so), each step still restores its predecessor's
// checkpoint and appends exactly once, and when the worker stops it
// drains the pool: no sandbox of it is left.
func TestWarmPoolE2E(t *testing.T) {
	e := newChaos(t, "pool", "")
	w := e.startWorker(t, "a", "--warm-pool", "2", "--log-level", "debug")
	const n = 6
	var steps []spec.PlanStep
	for i := 1; i <= n; i++ {
		s := e.step(fmt.Sprintf("s%d", i), "wsfile", map[string]any{
			"append": map[string]any{"log.txt": fmt.Sprintf("%d\n", i)}, "read": []any{"log.txt"}, "strict": true,
		})
		if i > 1 {
			s.DependsOn = []string{fmt.Sprintf("s%d", i-1)}
			s.ExplicitDependsOn = s.DependsOn
		}
		steps = append(steps, s)
	}
	run := e.submit(t, e.queue+"-run", steps...)
	st := e.waitRun(t, run)
	require.Equal(t, workflows.RunSucceeded, st.Status)
	var want strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	files, _ := stepRecord(t, st, fmt.Sprintf("s%d", n)).Output["files"].(map[string]any)
	require.Equal(t, want.String(), files["log.txt"])

	// The first step teaches the pool its key (a miss); later steps of the
	// same image and limits are served warm.
	hits := 0
	for _, line := range strings.Split(w.log(), "\n") {
		if strings.Contains(line, `msg="sandbox pool" `) && strings.Contains(line, " hit=true ") {
			hits++
		}
	}
	t.Logf("pool hits: %d of %d steps", hits, n)
	require.Positive(t, hits, "no step was served from the pool:\n%s", w.log())
	require.NotEmpty(t, e.containers(t, ""), "the pool holds no warm sandbox while the worker runs")

	w.signal(t, syscall.SIGTERM)
	require.NoError(t, w.waitExit(t, 2*time.Minute))
	require.Contains(t, w.log(), `msg="sandbox pool drained"`)
	require.Eventually(t, func() bool { return len(e.containers(t, "")) == 0 }, 20*time.Second, 250*time.Millisecond,
		"sandboxes left after the worker drained its pool: %d", len(e.containers(t, "")))
}
