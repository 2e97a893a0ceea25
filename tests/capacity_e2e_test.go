//go:build e2e

package tests

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"

	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/worker"
	"github.com/agentflow/agentflow/workflows"
)

// TestCapacityBudget: a worker with a budget of one CPU and four slots
// runs three independent one-CPU steps one at a time (by the server's own
// record of when each attempt was taken and completed: no two overlap),
// while half-CPU steps would share it; a step larger than the whole
// budget fails at once with a policy error naming the budget.
func TestCapacityBudget(t *testing.T) {
	e := startEngineWith(t, func(c *worker.Config) {
		c.CPUBudget = 1_000_000_000
		c.MaxConcurrentSteps = 4
	})
	var steps []string
	var ps []spec.PlanStep
	for _, id := range []string{"a", "b", "c"} {
		s := e.step(id, "testtool", map[string]any{"mode": "sleep", "seconds": 2})
		s.Resources.NanoCPUs = 1_000_000_000
		ps = append(ps, s)
		steps = append(steps, id)
	}
	id := "e2e-capacity-" + strings.ReplaceAll(time.Now().Format("150405.000"), ".", "")
	run := e.start(t, id, plan("e2e-capacity", ps...), nil)
	res, err := e.wait(t, run)
	require.NoError(t, err)
	require.Equal(t, workflows.RunSucceeded, res.Status)

	spans := e.activitySpans(t, id, run.GetRunID(), func(a *historypb.ActivityTaskScheduledEventAttributes) bool {
		return a.GetActivityType().GetName() == "RunStep"
	})
	require.Len(t, spans, len(steps))
	sort.Slice(spans, func(i, j int) bool { return spans[i].closed.Before(spans[j].closed) })
	// The sandbox of a step exists only inside its activity, between the
	// activity's start and completion; a step that waits for the budget
	// does so inside its activity too, so compare completions with the
	// next step's sandbox phase: the tool runs ≥ 2 s, so two steps whose
	// sandboxes overlapped would complete less than 2 s apart.
	for i := 1; i < len(spans); i++ {
		require.GreaterOrEqual(t, spans[i].closed.Sub(spans[i-1].closed), 2*time.Second,
			"two one-CPU steps ran at once on a one-CPU budget")
	}

	big := e.step("huge", "testtool", map[string]any{"mode": "ok"})
	big.Resources.NanoCPUs = 2_000_000_000
	big.Retries = 2
	bigID := id + "-huge"
	_, err = e.wait(t, e.start(t, bigID, plan("e2e-capacity-huge", big), nil))
	require.Error(t, err)
	r := stepRecord(t, e.status(t, bigID), "huge")
	require.Equal(t, workflows.StepFailed, r.Status)
	require.Equal(t, int32(1), r.Attempts, "a policy failure is not retried")
	require.Contains(t, r.Error, "more than this worker's whole budget")
	e.requireNoContainers(t, id)
}
