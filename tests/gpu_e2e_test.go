//go:build e2e

package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/agentflow/agentflow/activities"
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

// TestGPUDevicePinning: a worker with two GPUs (--gpus 2; --gpu-policy
// ignore, as this machine has none, so the devices are held and recorded
// but not attached) runs two one-GPU steps at once, each on its own
// device, and a two-GPU step only once neither holds a device: the
// daemon's own record of each sandbox's start and death, with the devices
// it was labelled with, shows no device shared at any moment. The two-GPU
// step is scheduled when the first one-GPU step ends, while the second
// still runs, so it has to wait for that device; its tool sees both
// devices in AGENTFLOW_GPU_DEVICES.
func TestGPUDevicePinning(t *testing.T) {
	e := startEngine(t)
	queue, _ := e.startWorkerProcess(t, "gpu2", "--gpus", "2", "--gpu-policy", "ignore")
	a := e.step("train_a", "testtool", map[string]any{"mode": "sleep", "seconds": 2})
	b := e.step("train_b", "testtool", map[string]any{"mode": "sleep", "seconds": 5})
	both := e.step("train_both", "testtool", map[string]any{"mode": "echoenv",
		"names": []any{activities.EnvGPUDevices, activities.EnvGPUIgnored}}, "train_a")
	a.Resources.GPUs, b.Resources.GPUs, both.Resources.GPUs = 1, 1, 2

	id := "e2e-gpu-pin-" + strings.ReplaceAll(time.Now().Format("150405.000"), ".", "")
	since := time.Now().Add(-time.Second)
	run := e.startOn(t, queue, id, plan("e2e-gpu-pin", a, b, both), nil)
	res, err := e.wait(t, run)
	require.NoError(t, err)
	require.Equal(t, workflows.RunSucceeded, res.Status)

	values, _ := stepRecord(t, e.status(t, id), "train_both").Output["values"].(map[string]any)
	require.Equal(t, "0,1", values[activities.EnvGPUDevices], "the two-GPU step's tool sees both devices")
	require.Equal(t, "1", values[activities.EnvGPUIgnored])

	lives := e.sandboxLives(t, id, since)
	require.Len(t, lives, 3, "one sandbox per step: %v", lives)
	la, lb, lc := lives["train_a"], lives["train_b"], lives["train_both"]
	require.NotNil(t, la)
	require.NotNil(t, lb)
	require.NotNil(t, lc)
	t.Logf("sandboxes: train_a %s, train_b %s, train_both %s", la, lb, lc)
	require.ElementsMatch(t, []string{"0", "1"}, []string{la.devices, lb.devices},
		"the one-GPU steps hold different devices")
	require.Equal(t, "0,1", lc.devices)
	require.True(t, la.overlaps(lb), "the one-GPU steps ran at once: %s and %s", la, lb)
	require.False(t, lc.overlaps(la), "the two-GPU step overlapped train_a: %s and %s", lc, la)
	require.False(t, lc.overlaps(lb), "the two-GPU step overlapped train_b: %s and %s", lc, lb)

	// Temporal's view agrees for the pair: the two attempts taken first
	// (the one-GPU steps; the two-GPU step is scheduled after train_a
	// completed) were both taken before either completed.
	spans := e.activitySpans(t, id, run.GetRunID(), func(a *historypb.ActivityTaskScheduledEventAttributes) bool {
		return a.GetTaskQueue().GetName() == workflows.GPUTaskQueue(queue)
	})
	require.Len(t, spans, 3)
	slices.SortFunc(spans, func(x, y *activitySpan) int { return x.started.Compare(y.started) })
	require.True(t, spans[1].started.Before(spans[0].closed), "the one-GPU steps were not taken at once")
	e.requireNoContainers(t, id)
}

// sandboxLife is one sandbox as the Docker daemon recorded it: when its
// container started and died, and the GPU devices it was labelled with.
type sandboxLife struct {
	devices       string
	started, died time.Time
}

func (l *sandboxLife) overlaps(o *sandboxLife) bool {
	return l.started.Before(o.died) && o.started.Before(l.died)
}

func (l *sandboxLife) String() string {
	return fmt.Sprintf("[%s %s–%s]", l.devices, l.started.Format("15:04:05.000"), l.died.Format("15:04:05.000"))
}

// sandboxLives reads the daemon's start and die events of the agent's
// sandboxes since then, by step ID; each sandbox must have both.
func (e *engineEnv) sandboxLives(t *testing.T, agentID string, since time.Time) map[string]*sandboxLife {
	t.Helper()
	f := filters.NewArgs(filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("label", activities.LabelAgentID+"="+agentID),
		filters.Arg("event", string(events.ActionStart)), filters.Arg("event", string(events.ActionDie)))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	msgs, errs := e.docker.Events(ctx, events.ListOptions{
		Since:   strconv.FormatInt(since.Unix(), 10),
		Until:   strconv.FormatInt(time.Now().Add(time.Second).Unix(), 10),
		Filters: f,
	})
	lives := map[string]*sandboxLife{}
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				msgs = nil
				continue
			}
			step := m.Actor.Attributes[activities.LabelStepID]
			l := lives[step]
			if l == nil {
				l = &sandboxLife{devices: m.Actor.Attributes[activities.LabelGPUDevices]}
				lives[step] = l
			}
			at := time.Unix(0, m.TimeNano)
			switch m.Action {
			case events.ActionStart:
				require.True(t, l.started.IsZero(), "step %s: two sandboxes started", step)
				l.started = at
			case events.ActionDie:
				l.died = at
			}
		case err := <-errs:
			if err != nil && !errors.Is(err, io.EOF) {
				require.NoError(t, err)
			}
			for step, l := range lives {
				require.False(t, l.started.IsZero() || l.died.IsZero(), "step %s: no start or no death recorded", step)
			}
			return lives
		}
	}
}
