package workflows

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/internal/testenv"
)

const testImage = "sha256:0000000000000000000000000000000000000000000000000000000000000001"

// tool builds a tool step with explicit dependencies.
func tool(id string, deps ...string) spec.PlanStep {
	return spec.PlanStep{
		ID: id, Tool: id + "-tool:1.0", Image: testImage,
		DependsOn: deps, ExplicitDependsOn: deps, Timeout: 30 * time.Second,
	}
}

func approvalStep(id string, timeout time.Duration, deps ...string) spec.PlanStep {
	return spec.PlanStep{
		ID: id, Approval: &spec.Approval{Prompt: "ok?", Timeout: timeout},
		DependsOn: deps, ExplicitDependsOn: deps,
	}
}

func testPlan(steps ...spec.PlanStep) spec.Plan {
	return spec.Plan{SchemaVersion: spec.PlanSchemaVersion, Name: "test-agent", Version: "1.0.0", Steps: steps}
}

// harness wraps a test environment and records what the fake activities saw.
type harness struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment

	mu       sync.Mutex
	requests map[string][]activities.StepRequest // by step, one per attempt
	finished []activities.RunEvent               // the run's end, as metrics saw it (RunEnded)
	// delivered: RunFinished executions (webhook delivery); workerWebhooks
	// is what the fake RunEnded says of the worker's own webhooks.
	delivered      []activities.RunEvent
	workerWebhooks bool
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	// Workflow and SDK logs go to the test's output: shown on failure or -v.
	ts.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(t.Output(), nil))))
	h := &harness{t: t, env: testenv.WorkflowEnv(&ts), requests: map[string][]activities.StepRequest{}}
	h.env.RegisterWorkflowWithOptions(AgentWorkflow, workflow.RegisterOptions{Name: WorkflowName})
	h.env.OnActivity(acts.RunEnded, mock.Anything, mock.Anything).Return(
		func(_ context.Context, ev activities.RunEvent) (bool, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.finished = append(h.finished, ev)
			return h.workerWebhooks, nil
		}).Maybe()
	h.env.OnActivity(acts.RunFinished, mock.Anything, mock.Anything).Return(
		func(_ context.Context, ev activities.RunEvent) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.delivered = append(h.delivered, ev)
			return nil
		}).Maybe()
	return h
}

// stepFn is a fake RunStep for one step.
type stepFn func(ctx context.Context, req activities.StepRequest) (*activities.StepResult, error)

// onStep mocks RunStep for one step ID.
func (h *harness) onStep(id string, fn stepFn) *testsuite.MockCallWrapper {
	return h.env.OnActivity(acts.RunStep, mock.Anything,
		mock.MatchedBy(func(r activities.StepRequest) bool { return r.StepID == id }),
	).Return(func(ctx context.Context, req activities.StepRequest) (*activities.StepResult, error) {
		h.mu.Lock()
		h.requests[req.StepID] = append(h.requests[req.StepID], req)
		h.mu.Unlock()
		return fn(ctx, req)
	})
}

// onAttempt mocks RunStep for one attempt of one step.
func (h *harness) onAttempt(id string, attempt int32, fn stepFn) *testsuite.MockCallWrapper {
	return h.env.OnActivity(acts.RunStep, mock.Anything,
		mock.MatchedBy(func(r activities.StepRequest) bool { return r.StepID == id && r.Attempt == attempt }),
	).Return(func(ctx context.Context, req activities.StepRequest) (*activities.StepResult, error) {
		h.mu.Lock()
		h.requests[req.StepID] = append(h.requests[req.StepID], req)
		h.mu.Unlock()
		return fn(ctx, req)
	})
}

func (h *harness) reqs(id string) []activities.StepRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests[id]
}

// attemptOf is the attempt number RunStep uses: the workflow's, or
// Temporal's on runs from before changeInfraRetries.
func attemptOf(ctx context.Context, req activities.StepRequest) int32 {
	if req.Attempt > 0 {
		return req.Attempt
	}
	return activity.GetInfo(ctx).Attempt
}

// succeed returns output and a checkpoint named after the step.
func succeed(output map[string]any) stepFn {
	return func(ctx context.Context, req activities.StepRequest) (*activities.StepResult, error) {
		return &activities.StepResult{
			Output: output, CheckpointID: "cp-" + req.StepID, Attempt: attemptOf(ctx, req),
		}, nil
	}
}

// fail returns an ApplicationError of the given type with failure details.
func fail(errType, msg string) stepFn {
	return func(ctx context.Context, req activities.StepRequest) (*activities.StepResult, error) {
		return nil, temporal.NewApplicationError(msg, errType, activities.StepFailureDetails{
			Attempt: attemptOf(ctx, req), CheckpointID: "cp-failed-" + req.StepID, ExitCode: 1, StderrTail: "boom",
		})
	}
}

// legacyRetries puts the run on the branch before changeInfraRetries (one
// activity execution per step, Temporal's RetryPolicy).
func (h *harness) legacyRetries() {
	h.env.OnGetVersion(changeInfraRetries, workflow.DefaultVersion, changeInfraRetriesVersion).
		Return(workflow.DefaultVersion)
}

// outcome is what a finished run looks like from the outside.
type outcome struct {
	result *Result
	err    error
	status *Status
}

func (h *harness) run(in Input) outcome {
	h.t.Helper()
	h.env.ExecuteWorkflow(WorkflowName, in)
	require.True(h.t, h.env.IsWorkflowCompleted())
	var o outcome
	o.err = h.env.GetWorkflowError()
	if o.err == nil {
		require.NoError(h.t, h.env.GetWorkflowResult(&o.result))
	} else {
		var appErr *temporal.ApplicationError
		var canceled *temporal.CanceledError
		switch {
		case errors.As(o.err, &appErr):
			require.True(h.t, appErr.NonRetryable())
			require.NoError(h.t, appErr.Details(&o.result))
		case errors.As(o.err, &canceled):
			require.NoError(h.t, canceled.Details(&o.result))
		default:
			h.t.Fatalf("unexpected workflow error %T: %v", o.err, o.err)
		}
	}
	o.status = h.query()
	h.env.AssertExpectations(h.t)
	return o
}

func (h *harness) query() *Status {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(StatusQuery)
	require.NoError(h.t, err)
	var st Status
	require.NoError(h.t, v.Get(&st))
	return &st
}

// steps indexes the step history by ID.
func (o outcome) steps() map[string]StepRecord {
	m := map[string]StepRecord{}
	for _, r := range o.status.StepHistory {
		m[r.ID] = r
	}
	return m
}

func (o outcome) errType() string {
	var appErr *temporal.ApplicationError
	if errors.As(o.err, &appErr) {
		return appErr.Type()
	}
	return ""
}
