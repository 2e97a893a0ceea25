//go:build e2e

package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/workflows"
)

// Needs: finished attempts survive (slice attempts: the result is recorded
// in the store before reporting, the next attempt of the step adopts it)
// and infrastructure retries (slice infra-retries). Today an attempt that
// finishes while Temporal is down past the 20 s heartbeat timeout is thrown
// away: without retries the step fails, with retries its tool runs again.
//
// Tool runs are counted by the Docker daemon (exec_start events of
// /bin/tool in this test's sandboxes): the one witness that neither the
// workers nor the store can get wrong. An adopted attempt runs no tool, so
// it does not count.
func TestChaosTemporalOutage(t *testing.T) {
	srv := startRestartableTemporal(t, t.TempDir())
	e := newChaos(t, "outage", srv.Address())
	tools := e.watchToolRuns(t)
	e.startWorker(t, "a")
	e.startWorker(t, "b")

	// Two runs of three parallel steps: one without retries (the issue's
	// "the step fails") and one with (its "the tool runs a second time").
	type job struct {
		id    string
		run   client.WorkflowRun
		steps []string
	}
	var jobs []*job
	for i, retries := range []int{0, 2} {
		j := &job{id: fmt.Sprintf("%s-run%d", e.queue, i)}
		var steps []spec.PlanStep
		for k := 1; k <= 3; k++ {
			s := e.step(fmt.Sprintf("p%d", k), "testtool", map[string]any{"mode": "sleep", "seconds": 12})
			s.Retries = retries
			steps = append(steps, s)
			j.steps = append(j.steps, s.ID)
		}
		j.run = e.submit(t, j.id, steps...)
		jobs = append(jobs, j)
	}
	all := 0
	for _, j := range jobs {
		all += len(j.steps)
	}
	// Every tool is running before Temporal goes away.
	require.Eventually(t, func() bool { return tools.total() >= all }, chaosBound, 250*time.Millisecond,
		"not all tools started: %v", tools)

	srv.Stop()
	down := time.Now()
	// The steps finish while Temporal is down: each worker logs the end of
	// its attempt before it tries to report it.
	require.Eventually(t, func() bool {
		n := 0
		for _, j := range jobs {
			for _, s := range j.steps {
				if e.worker(t, "a").ranStep(j.id, s) || e.worker(t, "b").ranStep(j.id, s) {
					n++
				}
			}
		}
		return n == all
	}, chaosBound, 250*time.Millisecond, "not every step finished during the outage")
	// The outage lasts 33 s in all, longer than the heartbeat timeout. The
	// sleep is the length of the fault, not a synchronisation.
	time.Sleep(time.Until(down.Add(33 * time.Second)))
	srv.Start()

	// Every run and step is checked (assert, not require), so one failure
	// report shows both halves of the fault.
	for _, j := range jobs {
		st := e.waitRun(t, j.run)
		for _, s := range j.steps {
			assert.Equal(t, 1, tools.count(j.id, s), "the tool of %s/%s ran %d times", j.id, s, tools.count(j.id, s))
		}
		assert.Equal(t, workflows.RunSucceeded, st.Status, "run %s", j.id)
		for _, s := range j.steps {
			assert.Equal(t, workflows.StepSuccess, stepRecord(t, st, s).Status, "%s/%s", j.id, s)
		}
	}
	for _, j := range jobs {
		e.requireNoSandboxes(t, j.id, time.Minute)
	}
}
