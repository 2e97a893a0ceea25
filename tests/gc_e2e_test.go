//go:build e2e

package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/gc"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/worker"
	"github.com/agentflow/agentflow/workflows"
)

// gcSpec: "first" writes first.json into its workspace; "review" waits for
// an approval; "second" starts from first's checkpoint and lists the files
// it inherited.
const gcSpec = `name: gc-%s
version: "1.0.0"
steps:
  - id: first
    tool: echo:1.0
    inputs: {write_input: "first.json"}
  - id: review
    approval: {prompt: "go on?", timeout: 1h}
    depends_on: [first]
  - id: second
    tool: echo:1.0
    inputs: {n: 2}
    depends_on: [review]
`

// TestGCKeepsWhatOpenAndResumedRunsNeed: with every closed run past
// retention (--older-than 0s), gc deletes the checkpoints, logs and records
// of the closed runs only; an open run keeps its own, and a resumed run
// (open) keeps what it carries from the failed run it resumes, restores it
// after gc, and succeeds.
func TestGCKeepsWhatOpenAndResumedRunsNeed(t *testing.T) {
	e := startCLIEnv(t)
	if !e.real {
		t.Skip("gc needs stored checkpoints: the real Docker host and the tool images (tools/build-images.sh)")
	}
	e.registerTools(t, "echo")
	stamp := time.Now().Format("150405")
	ckptDir, resultDir := filepath.Join(e.dir, "checkpoints"), filepath.Join(e.dir, "results")
	status := func(id string) workflows.Status {
		var st workflows.Status
		e.mustJSON(t, &st, "inspect", id)
		return st
	}
	waitApproval := func(id string) {
		require.Eventually(t, func() bool {
			v, err := e.client.QueryWorkflow(t.Context(), id, "", workflows.StatusQuery)
			var st workflows.Status
			return err == nil && v.Get(&st) == nil && st.CurrentStep == "review"
		}, 2*time.Minute, 200*time.Millisecond)
	}
	checkpointOf := func(st workflows.Status, step string) string {
		for _, r := range st.StepHistory {
			if r.ID == step {
				require.NotEmpty(t, r.CheckpointID, "%s of %s has a checkpoint", step, st.ID)
				return r.CheckpointID
			}
		}
		t.Fatalf("no step %s in %s", step, st.ID)
		return ""
	}
	stored := func(ck string) bool {
		_, errJ := os.Stat(filepath.Join(ckptDir, ck+".json"))
		_, errT := os.Stat(filepath.Join(ckptDir, ck+".tar"))
		require.Equal(t, errJ == nil, errT == nil, "checkpoint %s half there", ck)
		return errJ == nil
	}
	hasLogs := func(st workflows.Status) bool {
		entries, err := os.ReadDir(filepath.Join(e.logDir, objstore.EscapeSegment(st.ID), objstore.EscapeSegment(st.RunID)))
		return err == nil && len(entries) > 0
	}
	sp := e.writeSpec(t, "gc", fmt.Sprintf(gcSpec, stamp))

	// closed: approved, SUCCEEDED.
	closedID := "gc-closed-" + stamp
	code, _, _ := e.agentctl(t, "run", "-f", sp, "--name", closedID)
	require.Equal(t, 0, code)
	waitApproval(closedID)
	code, _, _ = e.agentctl(t, "approve", closedID, "--step", "review")
	require.Equal(t, 0, code)
	require.Eventually(t, func() bool { return status(closedID).Status == workflows.RunSucceeded }, 2*time.Minute, 200*time.Millisecond)
	closed := status(closedID)

	// failed: rejected at review, FAILED; then resumed (open, at review).
	failedID := "gc-resumed-" + stamp
	code, _, _ = e.agentctl(t, "run", "-f", sp, "--name", failedID)
	require.Equal(t, 0, code)
	waitApproval(failedID)
	code, _, _ = e.agentctl(t, "approve", failedID, "--step", "review", "--reject")
	require.Equal(t, 0, code)
	require.Eventually(t, func() bool { return status(failedID).Status == workflows.RunFailed }, 2*time.Minute, 200*time.Millisecond)
	failed := status(failedID)
	// The status document says FAILED a moment before the execution has
	// closed (its RunFinished activity still runs); resume refuses a run
	// that is still open, so try until it has closed.
	require.Eventually(t, func() bool {
		code, _, _ := e.agentctl(t, "resume", failedID)
		return code == 0
	}, time.Minute, 500*time.Millisecond, "resume %s", failedID)
	waitApproval(failedID)

	// open: waits at review.
	openID := "gc-open-" + stamp
	code, _, _ = e.agentctl(t, "run", "-f", sp, "--name", openID)
	require.Equal(t, 0, code)
	waitApproval(openID)
	open := status(openID)

	closedCk, failedCk, openCk := checkpointOf(closed, "first"), checkpointOf(failed, "first"), checkpointOf(open, "first")
	require.True(t, hasLogs(closed))
	gcArgs := []string{"gc", "--older-than", "0s", "--checkpoint-dir", ckptDir, "--log-dir", e.logDir, "--result-dir", resultDir, "-o", "json"}

	// --dry-run reports and deletes nothing.
	var dry gc.Report
	e.mustJSON(t, &dry, append(gcArgs, "--dry-run")...)
	require.True(t, dry.DryRun)
	require.Positive(t, dry.Bytes)
	require.True(t, stored(closedCk))
	require.True(t, hasLogs(closed))

	var rep gc.Report
	e.mustJSON(t, &rep, gcArgs...)
	require.Equal(t, 2, rep.RunsExpired, "the closed and the failed run")
	require.Equal(t, dry.Bytes, rep.Bytes, "the dry run reported what gc freed")
	require.Equal(t, 2, rep.Checkpoints, "first and second of the closed run")
	require.Equal(t, 1, rep.KeptByResume)

	require.False(t, stored(closedCk), "a closed run past retention loses its checkpoints")
	require.False(t, hasLogs(closed), "and its logs")
	require.True(t, stored(failedCk), "the failed run's checkpoint is carried by its resumed (open) run")
	require.False(t, hasLogs(failed), "the failed run's logs go")
	require.True(t, stored(openCk), "an open run keeps its checkpoints")
	require.True(t, hasLogs(open))

	// The resumed run restores the carried checkpoint after gc.
	code, _, _ = e.agentctl(t, "approve", failedID, "--step", "review")
	require.Equal(t, 0, code)
	require.Eventually(t, func() bool { return status(failedID).Status != workflows.RunRunning }, 2*time.Minute, 200*time.Millisecond)
	resumed := status(failedID)
	require.Equal(t, workflows.RunSucceeded, resumed.Status, "error: %s", resumed.Error)
	for _, r := range resumed.StepHistory {
		if r.ID == "second" {
			b, _ := json.Marshal(r.Output["workspace_files"])
			require.Contains(t, string(b), "first.json", "second restored first's workspace")
		}
	}
	code, _, _ = e.agentctl(t, "cancel", openID)
	require.Equal(t, 0, code)
}

// TestWorkerGCEvery: a worker with --gc-every collects on its own: a closed
// run's checkpoints go, an open run's stay.
func TestWorkerGCEvery(t *testing.T) {
	e := startCLIEnv(t, func(c *worker.Config) {
		c.GCEvery = time.Second
		c.GCOlderThan = time.Nanosecond // every closed run
	})
	if !e.real {
		t.Skip("gc needs stored checkpoints: the real Docker host and the tool images (tools/build-images.sh)")
	}
	e.registerTools(t, "echo")
	stamp := time.Now().Format("150405")
	sp := e.writeSpec(t, "gc", fmt.Sprintf(gcSpec, stamp))
	ckptDir := filepath.Join(e.dir, "checkpoints")
	firstCheckpoint := func(id string) string {
		var st workflows.Status
		e.mustJSON(t, &st, "inspect", id)
		require.NotEmpty(t, st.StepHistory[0].CheckpointID)
		return st.StepHistory[0].CheckpointID
	}
	stored := func(ck string) bool {
		_, err := os.Stat(filepath.Join(ckptDir, ck+".json"))
		return err == nil
	}
	atReview := func(id string) bool {
		v, err := e.client.QueryWorkflow(t.Context(), id, "", workflows.StatusQuery)
		var st workflows.Status
		return err == nil && v.Get(&st) == nil && st.CurrentStep == "review"
	}

	openID, closedID := "gcw-open-"+stamp, "gcw-closed-"+stamp
	for _, id := range []string{openID, closedID} {
		code, _, _ := e.agentctl(t, "run", "-f", sp, "--name", id)
		require.Equal(t, 0, code)
		require.Eventually(t, func() bool { return atReview(id) }, 2*time.Minute, 200*time.Millisecond)
	}
	openCk, closedCk := firstCheckpoint(openID), firstCheckpoint(closedID)
	code, _, _ := e.agentctl(t, "cancel", closedID, "--wait")
	require.Equal(t, 0, code)

	require.Eventually(t, func() bool { return !stored(closedCk) }, 2*time.Minute, 200*time.Millisecond,
		"the worker's gc deletes the closed run's checkpoint")
	require.True(t, stored(openCk), "and leaves the open run's")
	code, _, _ = e.agentctl(t, "cancel", openID, "--wait")
	require.Equal(t, 0, code)
}

// TestGCKeepsScheduleLatestRun: a schedule's latest run keeps its state past
// retention; once a newer run exists, the older one is collected.
func TestGCKeepsScheduleLatestRun(t *testing.T) {
	e := startCLIEnv(t)
	if !e.real {
		t.Skip("gc needs stored checkpoints: the real Docker host and the tool images (tools/build-images.sh)")
	}
	e.registerTools(t, "echo")
	const id = "gc-sched"
	spec := "name: " + id + "\nversion: \"1.0.0\"\nschedule: {cron: \"0 0 9 * * ?\"}\n" +
		"steps:\n  - id: only\n    tool: echo:1.0\n    inputs: {write_input: true}\n"
	code, _, errOut := e.agentctl(t, "schedule", "create", "-f", e.writeSpec(t, id, spec), "--id", id, "--paused")
	require.Equal(t, 0, code, errOut)
	t.Cleanup(func() { e.agentctl(t, "schedule", "delete", id) })
	ckptDir := filepath.Join(e.dir, "checkpoints")
	gcArgs := []string{"gc", "--older-than", "0s", "--checkpoint-dir", ckptDir, "--log-dir", e.logDir,
		"--result-dir", filepath.Join(e.dir, "results"), "-o", "json"}

	// trigger starts a run and returns its checkpoint once it has closed.
	seen := map[string]bool{}
	trigger := func() string {
		code, _, _ := e.agentctl(t, "schedule", "trigger", id)
		require.Equal(t, 0, code)
		var agentID, runID string
		require.Eventually(t, func() bool {
			var d scheduleDoc
			e.mustJSON(t, &d, "schedule", "describe", id, "-o", "json")
			for _, a := range d.RecentActions {
				if !seen[a.RunID] {
					agentID, runID = a.AgentID, a.RunID
					return true
				}
			}
			return false
		}, time.Minute, 200*time.Millisecond)
		seen[runID] = true
		require.NoError(t, e.client.GetWorkflow(t.Context(), agentID, runID).Get(t.Context(), nil))
		var st workflows.Status
		e.mustJSON(t, &st, "inspect", agentID, "--run-id", runID)
		require.NotEmpty(t, st.StepHistory[0].CheckpointID)
		return st.StepHistory[0].CheckpointID
	}
	stored := func(ck string) bool {
		_, err := os.Stat(filepath.Join(ckptDir, ck+".json"))
		return err == nil
	}

	first := trigger()
	var rep gc.Report
	e.mustJSON(t, &rep, gcArgs...)
	require.Zero(t, rep.RunsExpired, "the schedule's only run is its latest")
	require.True(t, stored(first))

	second := trigger()
	e.mustJSON(t, &rep, gcArgs...)
	require.Equal(t, 1, rep.RunsExpired)
	require.False(t, stored(first), "the older run of the schedule is collected")
	require.True(t, stored(second), "the latest is kept")
}
