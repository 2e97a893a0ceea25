//go:build e2e

package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/agentflow/agentflow/workflows"
)

// inspectJSON runs `agentctl inspect ID -o json` (the binary the worker
// processes of e use) and decodes the status document.
func (e *engineEnv) inspectJSON(t *testing.T, id string) workflows.Status {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(filepath.Join(e.tmp, "agentctl"), "--address", e.address, "inspect", id, "-o", "json")
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), errb.String())
	var st workflows.Status
	require.NoError(t, json.Unmarshal(out.Bytes(), &st), out.String())
	return st
}

// dryRunGPU runs `agentctl run --dry-run` of a one-GPU-step spec on queue
// and returns its exit code and output.
func (e *engineEnv) dryRunGPU(t *testing.T, queue string) (int, string) {
	t.Helper()
	specFile := filepath.Join(t.TempDir(), "gpu.yaml")
	require.NoError(t, os.WriteFile(specFile, []byte("name: e2e-gpu-dry\nversion: \"1.0.0\"\nsteps:\n  - id: train\n    image: "+
		e.images["testtool"]+"\n    inputs: {mode: ok}\n    resources: {gpu: \"1\"}\n"), 0o600))
	var out bytes.Buffer
	cmd := exec.Command(filepath.Join(e.tmp, "agentctl"), "--address", e.address, "run", "-f", specFile, "--dry-run", "--task-queue", queue)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return code, out.String()
}

// TestGPUQueue: GPU steps go to the GPU task queue; a worker that declares
// one GPU (--gpus 1; --gpu-policy ignore, as this machine has none) runs
// them one at a time: while the first holds the GPU the second is shown
// pending with the reason, and the server's own record of when each
// attempt was taken and completed shows the second taken only after the
// first completed.
func TestGPUQueue(t *testing.T) {
	e := startEngine(t)
	queue, _ := e.startWorkerProcess(t, "gpu1", "--gpus", "1", "--gpu-policy", "ignore")
	a := e.step("train_a", "testtool", map[string]any{"mode": "sleep", "seconds": 4})
	b := e.step("train_b", "testtool", map[string]any{"mode": "sleep", "seconds": 4})
	a.Resources.GPUs, b.Resources.GPUs = 1, 1
	code, out := e.dryRunGPU(t, queue)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `ok\s+gpu\s+step train\s+`+regexp.QuoteMeta(workflows.GPUTaskQueue(queue)), out)

	id := "e2e-gpu-queue-" + strings.ToLower(time.Now().Format("150405.000"))
	id = strings.ReplaceAll(id, ".", "")
	run := e.startOn(t, queue, id, plan("e2e-gpu-queue", a, b), nil)

	sawWait := ""
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		st := e.inspectJSON(t, id)
		for _, r := range st.StepHistory {
			if r.Status == workflows.StepPending && strings.Contains(r.Reason, "waiting for a free GPU") {
				sawWait = r.Reason
			}
		}
		if sawWait != "" || st.Status != workflows.RunRunning && st.Status != workflows.RunPending {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.NotEmpty(t, sawWait, "inspect never showed a step waiting for the GPU")
	require.Contains(t, sawWait, workflows.GPUTaskQueue(queue))

	res, err := e.wait(t, run)
	require.NoError(t, err)
	require.Equal(t, workflows.RunSucceeded, res.Status)

	// Taken (started) and completed times of the two attempts, as the
	// server recorded them.
	list := e.activitySpans(t, id, run.GetRunID(), func(a *historypb.ActivityTaskScheduledEventAttributes) bool {
		return a.GetTaskQueue().GetName() == workflows.GPUTaskQueue(queue)
	})
	require.Len(t, list, 2, "both GPU steps were scheduled on %s", workflows.GPUTaskQueue(queue))
	first, second := list[0], list[1]
	if second.started.Before(first.started) {
		first, second = second, first
	}
	require.False(t, second.started.Before(first.closed),
		"the second GPU step was taken (%s) before the first completed (%s)", second.started, first.closed)
	e.requireNoContainers(t, id)
}

// TestGPUStepWaitsWithoutGPUWorkers: on a cluster where no worker serves
// GPUs, a GPU step waits (pending, with the reason) instead of failing,
// and can be canceled; a dry run says no worker serves GPU steps (exit 2).
func TestGPUStepWaitsWithoutGPUWorkers(t *testing.T) {
	e := startEngine(t)
	_, _ = e.startWorkerProcess(t, "cpu-only") // builds the agentctl binary inspectJSON uses
	code, out := e.dryRunGPU(t, workflows.TaskQueue)
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "no worker serves GPU steps")

	s := e.step("needs_gpu", "testtool", map[string]any{"mode": "ok"})
	s.Resources.GPUs = 1
	id := "e2e-gpu-none-" + strings.ReplaceAll(time.Now().Format("150405.000"), ".", "")
	run := e.start(t, id, plan("e2e-gpu-none", s), nil)

	var reason string
	require.Eventually(t, func() bool {
		for _, r := range e.inspectJSON(t, id).StepHistory {
			if r.ID == "needs_gpu" && r.Status == workflows.StepPending {
				reason = r.Reason
			}
		}
		return reason != ""
	}, time.Minute, 300*time.Millisecond)
	require.Contains(t, reason, "none polls task queue "+workflows.GPUTaskQueue(workflows.TaskQueue))
	require.Contains(t, reason, "--gpus")

	require.NoError(t, e.client.CancelWorkflow(t.Context(), id, ""))
	_, err := e.wait(t, run)
	require.Error(t, err)
	require.Equal(t, workflows.RunCanceled, e.status(t, id).Status)
	require.Empty(t, e.containers(t, id))
}

// activitySpan is when the server recorded an activity task as taken by a
// worker (started) and as completed.
type activitySpan struct{ started, closed time.Time }

// activitySpans reads the spans of the run's activities that keep selects
// from its history; each must have started and completed.
func (e *engineEnv) activitySpans(t *testing.T, id, runID string, keep func(*historypb.ActivityTaskScheduledEventAttributes) bool) []*activitySpan {
	t.Helper()
	byEvent := map[int64]*activitySpan{}
	it := e.client.GetWorkflowHistory(t.Context(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		switch {
		case ev.GetActivityTaskScheduledEventAttributes() != nil:
			if keep(ev.GetActivityTaskScheduledEventAttributes()) {
				byEvent[ev.GetEventId()] = &activitySpan{}
			}
		case ev.GetActivityTaskStartedEventAttributes() != nil:
			if s := byEvent[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()]; s != nil {
				s.started = ev.GetEventTime().AsTime()
			}
		case ev.GetActivityTaskCompletedEventAttributes() != nil:
			if s := byEvent[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]; s != nil {
				s.closed = ev.GetEventTime().AsTime()
			}
		}
	}
	var spans []*activitySpan
	for _, s := range byEvent {
		require.False(t, s.started.IsZero() || s.closed.IsZero(), "an activity that did not start and complete")
		spans = append(spans, s)
	}
	return spans
}
