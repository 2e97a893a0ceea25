//go:build e2e

package tests

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/workflows"
)

// Worker faults (issue 9): the worker running a step of a spec WITHOUT
// retries dies, freezes or is stopped past its drain time; the other
// worker on the queue must finish the run, and no sandbox may be left.

// other names the second worker of a two-worker chaos test.
func other(name string) string {
	if name == "a" {
		return "b"
	}
	return "a"
}

// Needs: workflow-level infrastructure retries (slice infra-retries): today
// the heartbeat timeout of the dead worker's attempt fails a step without
// retries.
func TestChaosWorkerKill9(t *testing.T) {
	e := newChaos(t, "kill9", "")
	e.startWorker(t, "a")
	e.startWorker(t, "b")
	id := e.queue + "-run"
	// first writes a file; slow (killed) starts from first's checkpoint
	// and hands it on; check reads the file. The retry of slow on the
	// surviving worker must restore the checkpoint first wrote, which
	// (activities start eagerly on the worker of the workflow task) is
	// usually the killed worker's.
	first := e.step("first", "wsfile", map[string]any{"write": map[string]any{"a.txt": "from first"}})
	slow := e.step("slow", "testtool", map[string]any{"mode": "sleep", "seconds": 15}, "first")
	check := e.step("check", "wsfile", map[string]any{"read": []any{"a.txt"}, "strict": true}, "slow")
	run := e.submit(t, id, first, slow, check)

	r := e.waitToolRunning(t, id, "slow")
	victim := e.worker(t, r.worker)
	t.Logf("first ran on a=%v b=%v; killing %s", e.worker(t, "a").ranStep(id, "first"), e.worker(t, "b").ranStep(id, "first"), victim.name)
	victim.signal(t, syscall.SIGKILL)
	_ = victim.waitExit(t, time.Minute)

	st := e.waitRun(t, run)
	require.Equal(t, workflows.RunSucceeded, st.Status)
	rec := stepRecord(t, st, "slow")
	require.Equal(t, workflows.StepSuccess, rec.Status)
	require.GreaterOrEqual(t, rec.Attempts, int32(2), "the killed attempt must count")
	require.True(t, e.worker(t, other(r.worker)).ranStep(id, "slow"), "the surviving worker did not run the step")
	files, _ := stepRecord(t, st, "check").Output["files"].(map[string]any)
	require.Equal(t, "from first", files["a.txt"], "the workspace did not survive the kill")
	// The survivor's reaper removes the dead owner's sandbox (it sweeps
	// once a minute).
	e.requireNoSandboxes(t, id, 3*time.Minute)
}

// Needs: workflow-level infrastructure retries (slice infra-retries): the
// frozen worker misses its heartbeats (35 s > 20 s), the attempt times out
// and a step without retries fails.
func TestChaosWorkerSIGSTOP(t *testing.T) {
	e := newChaos(t, "sigstop", "")
	e.startWorker(t, "a")
	e.startWorker(t, "b")
	id := e.queue + "-run"
	run := e.submit(t, id, e.step("slow", "testtool", map[string]any{"mode": "sleep", "seconds": 15}))

	r := e.waitToolRunning(t, id, "slow")
	victim := e.worker(t, r.worker)
	victim.signal(t, syscall.SIGSTOP)
	// The fault itself: the worker stays frozen for 35 s, longer than the
	// 20 s heartbeat timeout. This sleep is the length of the fault, not a
	// synchronisation.
	time.Sleep(35 * time.Second)
	victim.signal(t, syscall.SIGCONT)

	st := e.waitRun(t, run)
	require.Equal(t, workflows.RunSucceeded, st.Status)
	rec := stepRecord(t, st, "slow")
	require.Equal(t, workflows.StepSuccess, rec.Status)
	require.GreaterOrEqual(t, rec.Attempts, int32(2), "the timed-out attempt must count")
	// The thawed worker finishes (or abandons) its attempt and removes its
	// sandbox itself; nothing needs the reaper here, but allow for it.
	e.requireNoSandboxes(t, id, 3*time.Minute)
	require.False(t, victim.exited(), "the thawed worker died: %v", victim.err)
}

// Needs: worker stop hand-back (slice attempts): today the worker exits
// after --stop-timeout without reporting its attempts (Temporal only learns
// of them from the heartbeat timeout), and may leave its sandboxes running
// (the issue saw 4 of 4); and infrastructure retries (slice infra-retries)
// so the handed-back attempts are retried on the other worker.
func TestChaosWorkerSIGTERMPastDrain(t *testing.T) {
	e := newChaos(t, "sigterm", "")
	e.startWorker(t, "a", "--stop-timeout", "3s")
	e.startWorker(t, "b", "--stop-timeout", "3s")
	id := e.queue + "-run"
	// Four parallel steps, as in the issue: they start on the worker that
	// runs the workflow task (eager activities), or spread over both.
	var steps []spec.PlanStep
	var ids []string
	for k := 1; k <= 4; k++ {
		s := e.step(fmt.Sprintf("p%d", k), "testtool", map[string]any{"mode": "sleep", "seconds": 40})
		steps = append(steps, s)
		ids = append(ids, s.ID)
	}
	run := e.submit(t, id, steps...)

	owner := map[string]string{} // step → worker running its first attempt
	for _, s := range ids {
		owner[s] = e.waitToolRunning(t, id, s).worker
	}
	victim := e.worker(t, owner[ids[0]])
	var handed []string
	for _, s := range ids {
		if owner[s] == victim.name {
			handed = append(handed, s)
		}
	}
	t.Logf("worker %s runs %v when it is stopped", victim.name, handed)
	victim.signal(t, syscall.SIGTERM)
	require.NoError(t, victim.waitExit(t, 2*time.Minute), "a stopped worker exits 0")

	// When the process is gone, so are its sandboxes (removal in the
	// daemon may trail the API call by moments).
	assert.Eventually(t, func() bool { return len(e.workerContainers(t, victim.name)) == 0 }, 20*time.Second, 250*time.Millisecond,
		"worker %s exited with its sandboxes still there", victim.name)
	t.Logf("sandboxes of %s after it exited: %d", victim.name, len(e.workerContainers(t, victim.name)))

	st := e.waitRun(t, run)
	for _, s := range handed {
		atts := e.stepAttempts(t, id, run.GetRunID(), s)
		require.NotEmpty(t, atts, s)
		// Reported by the worker before it exited, not found out by
		// Temporal through the missing heartbeats.
		assert.Equal(t, "failed", atts[0].Outcome, "%s: the stopped worker's attempt was not reported: %+v", s, atts[0])
		assert.Equal(t, failure.SandboxLost, atts[0].Type, "%s: handed-back attempt: %s", s, atts[0].Message)
	}

	require.Equal(t, workflows.RunSucceeded, st.Status)
	for _, s := range ids {
		require.Equal(t, workflows.StepSuccess, stepRecord(t, st, s).Status, s)
	}
	require.True(t, e.worker(t, other(victim.name)).ranStep(id, handed[0]), "the other worker did not run %s", handed[0])
	e.requireNoSandboxes(t, id, time.Minute)
	require.Contains(t, victim.log(), `msg="worker stopped`) // "worker stopped" or "…; running steps were handed back"
}

// TestChaosWorkerSIGTERMFinishes: the graceful half of a worker stop. A
// worker stopped while its step runs, with a stop timeout longer than the
// step, finishes that attempt and reports it before it exits 0: the step
// succeeds on its first attempt, on that worker, without a sandbox left
// behind, and the run goes on on a worker started after the first one
// exited.
func TestChaosWorkerSIGTERMFinishes(t *testing.T) {
	e := newChaos(t, "sigterm-finish", "")
	a := e.startWorker(t, "a", "--stop-timeout", "2m")
	id := e.queue + "-run"
	// hold sleeps, so the signal comes mid-step; write and check run on
	// the next worker, check reading what write left in the workspace.
	hold := e.step("hold", "testtool", map[string]any{"mode": "sleep", "seconds": 8})
	write := e.step("write", "wsfile", map[string]any{"write": map[string]any{"a.txt": "from write"}}, "hold")
	check := e.step("check", "wsfile", map[string]any{"read": []any{"a.txt"}, "strict": true}, "write")
	run := e.submit(t, id, hold, write, check)

	r := e.waitToolRunning(t, id, "hold")
	require.Equal(t, "a", r.worker)
	a.signal(t, syscall.SIGTERM)
	require.NoError(t, a.waitExit(t, 2*time.Minute), "a stopped worker exits 0")
	require.True(t, a.ranStep(id, "hold"), "the stopping worker did not finish its running step:\n%s", a.log())
	require.Empty(t, e.workerContainers(t, "a"), "the stopped worker left a sandbox")

	// The run goes on once another worker polls the queue.
	e.startWorker(t, "b")
	st := e.waitRun(t, run)
	require.Equal(t, workflows.RunSucceeded, st.Status)
	rec := stepRecord(t, st, "hold")
	require.Equal(t, workflows.StepSuccess, rec.Status)
	require.EqualValues(t, 1, rec.Attempts, "the step was finished by the stopping worker, not retried")
	atts := e.stepAttempts(t, id, run.GetRunID(), "hold")
	require.Len(t, atts, 1)
	require.Equal(t, "completed", atts[0].Outcome)
	require.True(t, e.worker(t, "b").ranStep(id, "check"))
	files, _ := stepRecord(t, st, "check").Output["files"].(map[string]any)
	require.Equal(t, "from write", files["a.txt"])
	e.requireNoSandboxes(t, id, time.Minute)
}
