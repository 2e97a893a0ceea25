package activities

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/logstore"
)

// failureDetails decodes the StepFailureDetails of a failed RunStep.
func failureDetails(t *testing.T, err error) (*temporal.ApplicationError, StepFailureDetails) {
	t.Helper()
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "want an ApplicationError, got %v", err)
	var d StepFailureDetails
	require.NoError(t, app.Details(&d))
	return app, d
}

// The workflow numbers attempts (StepRequest.Attempt); the activity's own
// attempt counter is always 1 then. Sandbox, labels, env, log key, result
// and failure details all follow the workflow's number.
func TestRunStepUsesTheWorkflowsAttemptNumber(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run("fail="+strconv.FormatBool(fail), func(t *testing.T) {
			h := newHarness(t)
			h.opts.Identity = "4242@worker-a"
			h.host.exec = result(`{"attempt":"x"}`, "err line\n", 0)
			if fail {
				h.host.exec = result("", "err line\n", 2)
			}
			req := baseReq()
			req.Attempt = 3
			res, err := h.run(t, req)

			want := ExecutionIDFor(req.AgentID, req.RunID, req.StepID, 3)
			provisions, execs, _, terminates, _ := h.host.snapshot()
			require.Len(t, provisions, 1)
			require.Equal(t, want, provisions[0].ExecutionID)
			require.Equal(t, "3", provisions[0].Labels[LabelAttempt])
			require.Equal(t, "3", execs[0].Env["AGENTFLOW_ATTEMPT"])
			require.Equal(t, []exechost.ExecutionID{want}, terminates)
			b, lerr := h.logs.Read(t.Context(), logstore.Key{AgentID: req.AgentID, RunID: req.RunID, StepID: req.StepID, Attempt: 3}, 0)
			require.NoError(t, lerr)
			require.Contains(t, string(b), "err line")
			if !fail {
				require.NoError(t, err)
				require.Equal(t, int32(3), res.Attempt)
				require.Equal(t, "4242@worker-a", res.Worker)
				require.Zero(t, res.AdoptedFrom)
				return
			}
			_, d := failureDetails(t, err)
			require.Equal(t, int32(3), d.Attempt)
			require.Equal(t, "4242@worker-a", d.Worker)
		})
	}
}

// Failures classified before the sandbox exists carry the attempt and the
// worker too.
func TestEarlyFailuresCarryAttemptAndWorker(t *testing.T) {
	h := newHarness(t)
	h.opts.Identity = "w-early"
	h.host.provisionErr = errors.New("daemon down")
	req := baseReq()
	req.Attempt = 2
	_, err := h.run(t, req)
	app, d := failureDetails(t, err)
	require.Equal(t, ErrTypeSandboxLost, app.Type())
	require.Equal(t, int32(2), d.Attempt)
	require.Equal(t, "w-early", d.Worker)
}

// An old run (no Attempt in the request) keeps the activity's attempt.
func TestRunStepWithoutAttemptUsesActivityAttempt(t *testing.T) {
	h := newHarness(t)
	res, err := h.run(t, baseReq())
	require.NoError(t, err)
	require.Equal(t, int32(1), res.Attempt)
	require.NotEmpty(t, res.Worker, "a worker without an identity gets pid@hostname")
}

// A stopping worker hands running attempts back: the exec is aborted (the
// host destroys the sandbox), nothing is checkpointed, and the attempt
// fails as SandboxLost naming the worker, so it is retried elsewhere.
func TestHandBackOnWorkerStop(t *testing.T) {
	h := newHarness(t)
	h.opts.Identity = "77@stopping"
	handBack := make(chan struct{})
	h.opts.HandBack = handBack
	started := make(chan struct{})
	h.host.execStarted = started
	h.host.exec = func(ctx context.Context, _ exechost.ExecRequest) (*exechost.ExecResult, error) {
		<-ctx.Done()
		return &exechost.ExecResult{ExitCode: -1, Aborted: true}, fmt.Errorf("exec: %w", exechost.ErrAborted)
	}
	go func() {
		<-started
		close(handBack)
	}()
	req := baseReq()
	req.Attempt = 4
	_, err := h.run(t, req)
	app, d := failureDetails(t, err)
	require.Equal(t, ErrTypeSandboxLost, app.Type())
	require.False(t, app.NonRetryable())
	require.Equal(t, "worker 77@stopping stopped before the attempt finished; handed back", app.Message())
	require.Equal(t, int32(4), d.Attempt)
	require.Empty(t, h.host.checkpointRequests())
	_, _, _, terminates, live := h.host.snapshot()
	require.Len(t, terminates, 1)
	require.Zero(t, live)
	require.InDelta(t, 1, testutil.ToFloat64(h.metrics.AttemptFailures.WithLabelValues("echo:1.0", "infrastructure", "SandboxLost")), 0)
}

// blockingResolver is a secret source (a slow Vault) that answers only
// when its context ends.
type blockingResolver struct{ started chan struct{} }

func (r blockingResolver) Resolve(ctx context.Context, _ string) (string, error) {
	close(r.started)
	<-ctx.Done()
	return "", ctx.Err()
}

// A hand-back that interrupts secret resolution is still a hand-back
// (SandboxLost, retried), not an unresolvable secret (InvalidInput, which
// would fail the step for good).
func TestHandBackDuringSecretResolution(t *testing.T) {
	h := newHarness(t)
	handBack := make(chan struct{})
	h.opts.HandBack = handBack
	started := make(chan struct{})
	h.opts.Secrets = blockingResolver{started: started}
	go func() {
		<-started
		close(handBack)
	}()
	req := baseReq()
	req.SecretSources = map[string]string{"token": "vault://kv/token#value"}
	_, err := h.run(t, req)
	app, _ := failureDetails(t, err)
	require.Equal(t, ErrTypeSandboxLost, app.Type(), "got %v", err)
	require.Contains(t, app.Message(), "handed back")
	provisions, _, _, _, _ := h.host.snapshot()
	require.Empty(t, provisions)
}
