package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/failure"
)

// sequence is a fake RunStep that answers attempt n with fns[n-1]; an
// attempt beyond the script fails the test (the workflow tried too often).
func sequence(t *testing.T, fns ...stepFn) stepFn {
	return func(ctx context.Context, req activities.StepRequest) (*activities.StepResult, error) {
		n := int(req.Attempt)
		if n < 1 || n > len(fns) {
			t.Errorf("attempt %d of step %s: the script has %d attempts", n, req.StepID, len(fns))
			return nil, temporal.NewNonRetryableApplicationError("unscripted attempt", "Unscripted", nil)
		}
		return fns[n-1](ctx, req)
	}
}

// infra fails an attempt with an infrastructure class, naming the worker.
func infra(typ, msg, worker string) stepFn {
	return func(_ context.Context, req activities.StepRequest) (*activities.StepResult, error) {
		return nil, failure.New(typ, msg, activities.StepFailureDetails{Attempt: req.Attempt, ExitCode: -1, Worker: worker})
	}
}

// toolFail fails an attempt as the tool's failure, with a checkpoint.
func toolFail(msg string) stepFn {
	return func(_ context.Context, req activities.StepRequest) (*activities.StepResult, error) {
		return nil, failure.New(failure.ToolFailed, msg+"\nstderr (tail):\nboom", activities.StepFailureDetails{
			Attempt: req.Attempt, ExitCode: 1, CheckpointID: fmt.Sprintf("cp-failed-%s-%d", req.StepID, req.Attempt), Worker: "w-tool",
		})
	}
}

func ok(worker string) stepFn {
	return func(_ context.Context, req activities.StepRequest) (*activities.StepResult, error) {
		return &activities.StepResult{Output: map[string]any{"n": req.Attempt}, CheckpointID: "cp-" + req.StepID,
			Attempt: req.Attempt, Worker: worker}, nil
	}
}

// timeout is what Temporal reports when the worker running the attempt
// stops heartbeating (killed) or overruns StartToClose (frozen), with the
// last heartbeat's details.
func timeout(typ enumspb.TimeoutType, heartbeat ...any) stepFn {
	return func(context.Context, activities.StepRequest) (*activities.StepResult, error) {
		return nil, temporal.NewTimeoutError(typ, nil, heartbeat...)
	}
}

func times(n int, fn stepFn) []stepFn {
	out := make([]stepFn, n)
	for i := range out {
		out[i] = fn
	}
	return out
}

// attemptView is an AttemptRecord without its times, for comparisons.
type attemptView struct {
	Attempt int32
	Status  string
	Class   string
	Type    string
	Worker  string
}

func views(recs []AttemptRecord) []attemptView {
	out := make([]attemptView, 0, len(recs))
	for _, r := range recs {
		out = append(out, attemptView{r.Attempt, r.Status, r.Class, r.Type, r.Worker})
	}
	return out
}

func TestInfraRetries(t *testing.T) {
	storeDown := infra(failure.StoreUnavailable, "object store s3://bucket/prefix unavailable: connection refused", "w-a")
	tests := []struct {
		name       string
		retries    int
		script     []stepFn
		wantStatus string
		wantError  string // exact step error ("" for success)
		want       []attemptView
		wantCP     string
	}{
		{
			name: "four infrastructure failures then success", retries: 0,
			script:     append(times(4, infra(failure.SandboxLost, "container gone", "w-a")), ok("w-b")),
			wantStatus: StepSuccess, wantCP: "cp-s",
			want: []attemptView{
				{1, AttemptFailed, ClassInfrastructure, failure.SandboxLost, "w-a"},
				{2, AttemptFailed, ClassInfrastructure, failure.SandboxLost, "w-a"},
				{3, AttemptFailed, ClassInfrastructure, failure.SandboxLost, "w-a"},
				{4, AttemptFailed, ClassInfrastructure, failure.SandboxLost, "w-a"},
				{5, AttemptSuccess, "", "", "w-b"},
			},
		},
		{
			name: "five infrastructure failures fail the step naming the last cause", retries: 3,
			script:     append(times(4, infra(failure.SandboxLost, "daemon restarting", "w-a")), storeDown),
			wantStatus: StepFailed,
			wantError:  "5 infrastructure failures; last: StoreUnavailable: object store s3://bucket/prefix unavailable: connection refused",
			want: []attemptView{
				{1, AttemptFailed, ClassInfrastructure, failure.SandboxLost, "w-a"},
				{2, AttemptFailed, ClassInfrastructure, failure.SandboxLost, "w-a"},
				{3, AttemptFailed, ClassInfrastructure, failure.SandboxLost, "w-a"},
				{4, AttemptFailed, ClassInfrastructure, failure.SandboxLost, "w-a"},
				{5, AttemptFailed, ClassInfrastructure, failure.StoreUnavailable, "w-a"},
			},
		},
		{
			name: "a tool failure without retries fails at once with the infrastructure budget untouched", retries: 0,
			script:     []stepFn{toolFail("exit status 3")},
			wantStatus: StepFailed, wantError: "ToolFailed: exit status 3\nstderr (tail):\nboom", wantCP: "cp-failed-s-1",
			want: []attemptView{{1, AttemptFailed, ClassTool, failure.ToolFailed, "w-tool"}},
		},
		{
			name: "infrastructure failures do not spend retries", retries: 1,
			script: []stepFn{
				infra(failure.ImageUnavailable, "pull: registry unreachable", "w-a"),
				toolFail("exit 1"),
				infra(failure.SandboxLost, "container gone", "w-b"),
				toolFail("exit 2"),
			},
			wantStatus: StepFailed, wantError: "ToolFailed: exit 2\nstderr (tail):\nboom", wantCP: "cp-failed-s-4",
			want: []attemptView{
				{1, AttemptFailed, ClassInfrastructure, failure.ImageUnavailable, "w-a"},
				{2, AttemptFailed, ClassTool, failure.ToolFailed, "w-tool"},
				{3, AttemptFailed, ClassInfrastructure, failure.SandboxLost, "w-b"},
				{4, AttemptFailed, ClassTool, failure.ToolFailed, "w-tool"},
			},
		},
		{
			name: "mixed failures within both budgets then success", retries: 1,
			script:     []stepFn{toolFail("exit 1"), infra(failure.SandboxLost, "gone", "w-a"), ok("w-c")},
			wantStatus: StepSuccess, wantCP: "cp-s",
			want: []attemptView{
				{1, AttemptFailed, ClassTool, failure.ToolFailed, "w-tool"},
				{2, AttemptFailed, ClassInfrastructure, failure.SandboxLost, "w-a"},
				{3, AttemptSuccess, "", "", "w-c"},
			},
		},
		{
			name: "a dead worker (heartbeat timeout) is infrastructure", retries: 0,
			script:     []stepFn{timeout(enumspb.TIMEOUT_TYPE_HEARTBEAT, "exec"), ok("w-b")},
			wantStatus: StepSuccess, wantCP: "cp-s",
			want: []attemptView{
				{1, AttemptFailed, ClassInfrastructure, failure.WorkerLost, ""},
				{2, AttemptSuccess, "", "", "w-b"},
			},
		},
		{
			name: "a dead worker is named by its last heartbeat", retries: 0,
			script:     []stepFn{timeout(enumspb.TIMEOUT_TYPE_HEARTBEAT, "exec", "w-a"), ok("w-b")},
			wantStatus: StepSuccess, wantCP: "cp-s",
			want: []attemptView{
				{1, AttemptFailed, ClassInfrastructure, failure.WorkerLost, "w-a"},
				{2, AttemptSuccess, "", "", "w-b"},
			},
		},
		{
			name: "a frozen worker (start-to-close timeout) is infrastructure", retries: 0,
			script:     append(times(5, timeout(enumspb.TIMEOUT_TYPE_START_TO_CLOSE)), ok("never")),
			wantStatus: StepFailed,
			wantError:  "5 infrastructure failures; last: WorkerLost: attempt timed out (StartToClose): the worker died or stopped answering",
			want: []attemptView{
				{1, AttemptFailed, ClassInfrastructure, failure.WorkerLost, ""},
				{2, AttemptFailed, ClassInfrastructure, failure.WorkerLost, ""},
				{3, AttemptFailed, ClassInfrastructure, failure.WorkerLost, ""},
				{4, AttemptFailed, ClassInfrastructure, failure.WorkerLost, ""},
				{5, AttemptFailed, ClassInfrastructure, failure.WorkerLost, ""},
			},
		},
		{
			name: "a panic in the activity is infrastructure", retries: 0,
			script: []stepFn{func(context.Context, activities.StepRequest) (*activities.StepResult, error) {
				panic("nil map")
			}, ok("w-b")},
			wantStatus: StepSuccess, wantCP: "cp-s",
			want: []attemptView{
				{1, AttemptFailed, ClassInfrastructure, failure.SandboxLost, ""},
				{2, AttemptSuccess, "", "", "w-b"},
			},
		},
		{
			name: "a policy violation ends the step at once", retries: 3,
			script:     []stepFn{infra(failure.SandboxLost, "gone", "w-a"), fail(failure.PolicyViolation, "env name looks like a secret")},
			wantStatus: StepFailed, wantError: "PolicyViolation: env name looks like a secret", wantCP: "cp-failed-s",
			want: []attemptView{
				{1, AttemptFailed, ClassInfrastructure, failure.SandboxLost, "w-a"},
				{2, AttemptFailed, ClassPermanent, failure.PolicyViolation, ""},
			},
		},
		{
			name: "a missing local image ends the step at once", retries: 3,
			script: []stepFn{func(_ context.Context, req activities.StepRequest) (*activities.StepResult, error) {
				return nil, failure.New(failure.ImageNotFound, "image sha256:01… is not on worker w-a", activities.StepFailureDetails{Worker: "w-a"})
			}},
			wantStatus: StepFailed, wantError: "ImageNotFound: image sha256:01… is not on worker w-a",
			want: []attemptView{{1, AttemptFailed, ClassPermanent, failure.ImageNotFound, "w-a"}},
		},
		{
			name: "a non-retryable error of a retryable type ends the step at once", retries: 3,
			script: []stepFn{func(context.Context, activities.StepRequest) (*activities.StepResult, error) {
				return nil, temporal.NewNonRetryableApplicationError("stop", failure.SandboxLost, nil)
			}},
			wantStatus: StepFailed, wantError: "SandboxLost: stop",
			want: []attemptView{{1, AttemptFailed, ClassPermanent, failure.SandboxLost, ""}},
		},
		{
			name: "an unclassified application error type is not retried", retries: 3,
			script: []stepFn{func(context.Context, activities.StepRequest) (*activities.StepResult, error) {
				return nil, temporal.NewApplicationError("what is this", "SomethingNobodyClassified")
			}},
			wantStatus: StepFailed, wantError: "SomethingNobodyClassified: what is this",
			want: []attemptView{{1, AttemptFailed, ClassPermanent, "SomethingNobodyClassified", ""}},
		},
		{
			name: "a step canceled by the activity ends canceled", retries: 3,
			script: []stepFn{func(context.Context, activities.StepRequest) (*activities.StepResult, error) {
				return nil, temporal.NewCanceledError("canceled on its own")
			}},
			wantStatus: StepCanceled,
			want:       []attemptView{{1, AttemptCanceled, "", "", ""}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			p := testPlan(tool("s"))
			p.Steps[0].Retries = tc.retries
			h.onStep("s", sequence(t, tc.script...))
			o := h.run(Input{Plan: p})
			rec := o.steps()["s"]
			require.Equal(t, tc.wantStatus, rec.Status)
			require.Equal(t, tc.wantError, rec.Error)
			require.Equal(t, tc.wantCP, rec.CheckpointID)
			require.Equal(t, tc.want, views(rec.AttemptHistory))
			require.EqualValues(t, len(tc.want), rec.Attempts, "attempts counts every attempt")
			if tc.wantStatus == StepSuccess {
				require.NoError(t, o.err)
				require.Equal(t, map[string]any{"n": float64(len(tc.want))}, rec.Output)
			} else {
				require.Equal(t, ErrTypeAgentFailed, o.errType())
			}

			// The workflow numbers attempts 1, 2, 3, … and sends the same
			// request otherwise.
			reqs := h.reqs("s")
			require.Len(t, reqs, len(tc.want))
			for i, req := range reqs {
				require.EqualValues(t, i+1, req.Attempt)
				req.Attempt = reqs[0].Attempt
				require.Equal(t, reqs[0], req)
			}
			for _, a := range rec.AttemptHistory {
				require.NotNil(t, a.FinishedAt, "attempt %d", a.Attempt)
				require.LessOrEqual(t, len(a.Error), maxAttemptError+len("…"))
				require.NotContains(t, a.Error, "\n")
				if a.Status == AttemptFailed {
					require.NotEmpty(t, a.Error)
					require.False(t, strings.HasPrefix(a.Error, a.Type+":"), "the type is its own field: %q", a.Error)
				}
			}
		})
	}
}

// TestAttemptBackoff: each budget waits on its own exponential backoff, in
// workflow time (the test clock moves only by the timers).
func TestAttemptBackoff(t *testing.T) {
	h := newHarness(t)
	p := testPlan(tool("s"))
	p.Steps[0].Retries = 3
	h.onStep("s", sequence(t,
		infra(failure.SandboxLost, "gone", "w"), // → 2 s
		infra(failure.SandboxLost, "gone", "w"), // → 4 s
		toolFail("exit 1"),                      // → 1 s
		toolFail("exit 1"),                      // → 2 s
		infra(failure.SandboxLost, "gone", "w"), // → 8 s
		ok("w"),
	))
	o := h.run(Input{Plan: p})
	require.NoError(t, o.err)
	hist := o.steps()["s"].AttemptHistory
	require.Len(t, hist, 6)
	var gaps []time.Duration
	for i := 1; i < len(hist); i++ {
		gaps = append(gaps, hist[i].StartedAt.Sub(*hist[i-1].FinishedAt))
	}
	require.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, time.Second, 2 * time.Second, 8 * time.Second}, gaps)
}

func TestBackoffAfter(t *testing.T) {
	tests := []struct {
		b    backoff
		want []time.Duration
	}{
		{toolBackoff, []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60, 60}},
		{infraBackoff, []time.Duration{2, 4, 8, 16, 30, 30}},
	}
	for _, tc := range tests {
		var got []time.Duration
		for n := 1; n <= len(tc.want); n++ {
			got = append(got, tc.b.after(n)/time.Second)
		}
		require.Equal(t, tc.want, got)
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	h := newHarness(t)
	p := testPlan(tool("s"), tool("after", "s"))
	// The first attempt fails at once; the run is canceled 1 s into the 2 s
	// backoff: no second attempt, the step and the run end canceled.
	h.onStep("s", sequence(t, infra(failure.SandboxLost, "gone", "w-a"), ok("never"))).Once()
	var mid *Status
	h.env.RegisterDelayedCallback(func() {
		mid = h.query()
		h.env.CancelWorkflow()
	}, time.Second)
	o := h.run(Input{Plan: p})
	var canceled *temporal.CanceledError
	require.True(t, errors.As(o.err, &canceled), "got %v", o.err)
	require.Equal(t, RunCanceled, o.result.Status)

	ms := outcome{status: mid}.steps()["s"]
	require.Equal(t, StepRunning, ms.Status, "a step waiting for its next attempt is still running")
	require.EqualValues(t, 1, ms.Attempts)
	require.Equal(t, []attemptView{{1, AttemptFailed, ClassInfrastructure, failure.SandboxLost, "w-a"}}, views(ms.AttemptHistory))
	require.Equal(t, "gone", ms.AttemptHistory[0].Error)

	s := o.steps()
	require.Equal(t, StepCanceled, s["s"].Status)
	require.EqualValues(t, 1, s["s"].Attempts)
	require.Equal(t, StepCanceled, s["after"].Status)
	require.Len(t, h.reqs("s"), 1)
	require.Empty(t, h.reqs("after"))
}

func TestCancelDuringAttempt(t *testing.T) {
	h := newHarness(t)
	p := testPlan(tool("s"))
	h.onAttempt("s", 1, infra(failure.SandboxLost, "gone", "w-a")).Once()
	// Far longer than the cancel point, in workflow time.
	h.onAttempt("s", 2, ok("never")).After(24 * time.Hour).Once()
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, time.Minute)
	o := h.run(Input{Plan: p})
	require.Equal(t, RunCanceled, o.result.Status)
	rec := o.steps()["s"]
	require.Equal(t, StepCanceled, rec.Status)
	require.Equal(t, []attemptView{
		{1, AttemptFailed, ClassInfrastructure, failure.SandboxLost, "w-a"},
		{2, AttemptCanceled, "", "", ""},
	}, views(rec.AttemptHistory))
}

func TestAdoptedAttemptIsRecorded(t *testing.T) {
	h := newHarness(t)
	p := testPlan(tool("s"))
	h.onStep("s", sequence(t, timeout(enumspb.TIMEOUT_TYPE_HEARTBEAT),
		func(_ context.Context, req activities.StepRequest) (*activities.StepResult, error) {
			return &activities.StepResult{Output: map[string]any{"from": "attempt 1"}, CheckpointID: "cp-1",
				Attempt: req.Attempt, Worker: "w-b", AdoptedFrom: 1}, nil
		}))
	o := h.run(Input{Plan: p})
	require.NoError(t, o.err)
	rec := o.steps()["s"]
	require.Equal(t, "cp-1", rec.CheckpointID)
	require.EqualValues(t, 2, rec.Attempts)
	require.EqualValues(t, 1, rec.AttemptHistory[1].AdoptedFrom)
	require.Zero(t, rec.AttemptHistory[0].AdoptedFrom)
}

func TestWorkerLostMessage(t *testing.T) {
	tests := []struct {
		name string
		fn   stepFn
		want string
	}{
		{"heartbeat with phase", timeout(enumspb.TIMEOUT_TYPE_HEARTBEAT, "checkpoint"),
			"attempt timed out (Heartbeat, last heartbeat in phase checkpoint): the worker died or stopped answering"},
		{"heartbeat with phase and worker", timeout(enumspb.TIMEOUT_TYPE_HEARTBEAT, "exec", "w-a"),
			"attempt timed out (Heartbeat, last heartbeat in phase exec): the worker died or stopped answering"},
		{"heartbeat without details", timeout(enumspb.TIMEOUT_TYPE_HEARTBEAT),
			"attempt timed out (Heartbeat): the worker died or stopped answering"},
		{"details that are not a phase", timeout(enumspb.TIMEOUT_TYPE_HEARTBEAT, map[string]int{"n": 1}),
			"attempt timed out (Heartbeat): the worker died or stopped answering"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.onStep("s", sequence(t, tc.fn, ok("w")))
			o := h.run(Input{Plan: testPlan(tool("s"))})
			require.NoError(t, o.err)
			a := o.steps()["s"].AttemptHistory[0]
			require.Equal(t, failure.WorkerLost, a.Type)
			require.Equal(t, tc.want, a.Error)
		})
	}
}

func TestShortError(t *testing.T) {
	long := strings.Repeat("é", maxAttemptError) // 2 bytes a rune
	tests := []struct{ in, want string }{
		{"ToolFailed: exit 1\nstderr (tail):\nboom", "ToolFailed: exit 1"},
		{"", ""},
		{long, long[:maxAttemptError] + "…"},
		{"x" + long, "x" + long[:maxAttemptError-2] + "…"},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, shortError(tc.in))
	}
}
