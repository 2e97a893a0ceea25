package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/internal/testenv"
)

func TestLinearSuccess(t *testing.T) {
	h := newHarness(t)
	p := testPlan(
		tool("fetch"),
		tool("extract"),
		tool("report"),
	)
	p.Inputs = []spec.InputDecl{{Name: "email_id", Type: spec.TypeString, Required: true}}
	p.Workspace = &spec.GitWorkspace{Repository: "/srv/repo", Revision: "main"}
	p.Steps[0].Inputs = map[string]any{"id": "{{ .inputs.email_id }}"}
	// extract depends on fetch only through its expression (implicit dependency).
	p.Steps[1].Inputs = map[string]any{"text": "{{ .steps.fetch.output.body }}", "n": "{{ len(.steps.fetch.output.body) }}"}
	p.Steps[1].DependsOn = []string{"fetch"}
	p.Steps[2].DependsOn = []string{"extract"}
	p.Steps[2].ExplicitDependsOn = []string{"extract"}
	p.Steps[2].Env = map[string]string{"CUSTOMER": "{{ .steps.extract.output.customer }}"}
	p.Outputs = []spec.OutputDecl{{Name: "customer", Value: "{{ .steps.extract.output.customer | upper }}"}}

	h.onStep("fetch", succeed(map[string]any{"body": "hello"})).Once()
	h.onStep("extract", succeed(map[string]any{"customer": "c-1"})).Once()
	h.onStep("report", succeed(map[string]any{"ok": true})).Once()

	o := h.run(Input{Plan: p, Inputs: map[string]any{"email_id": "e-42"}})
	require.NoError(t, o.err)
	require.Equal(t, RunSucceeded, o.result.Status)
	require.Equal(t, map[string]any{"customer": "C-1"}, o.result.Outputs)

	fetch := h.reqs("fetch")[0]
	require.Equal(t, map[string]any{"id": "e-42"}, fetch.Input)
	require.Equal(t, p.Workspace, fetch.Git, "a root step starts from the spec workspace")
	require.Empty(t, fetch.Checkpoints)
	require.Equal(t, "fetch-tool:1.0", fetch.Tool)
	require.Equal(t, testImage, fetch.Image)
	require.Equal(t, 30*time.Second, fetch.Timeout)

	extract := h.reqs("extract")[0]
	require.Equal(t, map[string]any{"text": "hello", "n": float64(5)}, extract.Input)
	require.Nil(t, extract.Git)
	require.Equal(t, []string{"cp-fetch"}, extract.Checkpoints)
	require.Equal(t, map[string]string{"CUSTOMER": "c-1"}, h.reqs("report")[0].Env)

	st := o.status
	require.Equal(t, RunSucceeded, st.Status)
	require.Equal(t, "3/3", st.Progress)
	require.Equal(t, "test-agent", st.Name)
	require.Equal(t, "1.0.0", st.Version)
	require.Empty(t, st.CurrentStep)
	require.NotNil(t, st.StartedAt)
	require.NotNil(t, st.FinishedAt)
	require.Equal(t, []string{"fetch", "extract", "report"}, historyIDs(st))
	for _, rec := range st.StepHistory {
		require.Equal(t, StepSuccess, rec.Status, rec.ID)
		require.EqualValues(t, 1, rec.Attempts, rec.ID)
		require.Equal(t, "cp-"+rec.ID, rec.CheckpointID)
		require.NotNil(t, rec.StartedAt)
		require.NotNil(t, rec.FinishedAt)
	}
	require.Equal(t, map[string]any{"email_id": "e-42"}, st.Context["inputs"])
	require.Equal(t, map[string]any{"output": map[string]any{"body": "hello"}}, st.Context["fetch"])
	require.Equal(t, map[string]any{"customer": "C-1"}, st.Outputs)

	require.Len(t, h.finished, 1)
	require.Equal(t, RunSucceeded, h.finished[0].Status)
	require.Equal(t, "test-agent", h.finished[0].Spec)
}

func historyIDs(st *Status) []string {
	var ids []string
	for _, r := range st.StepHistory {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestParallelBranchesRunConcurrently(t *testing.T) {
	h := newHarness(t)
	p := testPlan(tool("a"), tool("b", "a"), tool("c", "a"), tool("d", "c", "b"))
	h.onStep("a", succeed(map[string]any{"v": 1}))
	// b and c each take 10 s of workflow time; queried at 5 s both must be
	// running, which only happens if neither waited for the other.
	h.onStep("b", succeed(map[string]any{"v": 2})).After(10 * time.Second)
	h.onStep("c", succeed(map[string]any{"v": 3})).After(10 * time.Second)
	h.onStep("d", succeed(map[string]any{"v": 4}))

	var mid *Status
	h.env.RegisterDelayedCallback(func() { mid = h.query() }, 5*time.Second)
	o := h.run(Input{Plan: p})
	require.NoError(t, o.err)

	require.NotNil(t, mid)
	require.Equal(t, RunRunning, mid.Status)
	require.Equal(t, "1/4", mid.Progress)
	require.Equal(t, "b", mid.CurrentStep, "first running step in spec order")
	ms := outcome{status: mid}.steps()
	require.Equal(t, StepRunning, ms["b"].Status)
	require.Equal(t, StepRunning, ms["c"].Status)
	require.NotContains(t, ms, "d", "pending steps are not in step_history yet")

	// d layers its workspace in depends_on order as written: c, then b.
	require.Equal(t, []string{"cp-c", "cp-b"}, h.reqs("d")[0].Checkpoints)
	require.Equal(t, "4/4", o.status.Progress)
}

func TestIfFalseSkipsAndDependentsStillRun(t *testing.T) {
	h := newHarness(t)
	p := testPlan(
		tool("classify"),
		tool("refund", "classify"),
		tool("notify", "refund"),  // no `if`: runs although refund was skipped
		tool("audit", "refund"),   // `if` on the skipped step's status
		tool("archive", "refund"), // reads the skipped step's output: null
	)
	p.Steps[1].If = "{{ .steps.classify.output.kind == 'billing' }}"
	p.Steps[3].If = "{{ .steps.refund.status == 'skipped' }}"
	p.Steps[4].Inputs = map[string]any{"plan": "{{ .steps.refund.output.plan }}"}
	h.onStep("classify", succeed(map[string]any{"kind": "spam"}))
	h.onStep("notify", succeed(map[string]any{}))
	h.onStep("audit", succeed(map[string]any{}))
	h.onStep("archive", succeed(map[string]any{}))

	o := h.run(Input{Plan: p})
	require.NoError(t, o.err)
	require.Equal(t, RunSucceeded, o.result.Status)
	s := o.steps()
	require.Equal(t, StepSkipped, s["refund"].Status)
	require.Equal(t, ReasonConditionFalse, s["refund"].Reason)
	require.Equal(t, StepSuccess, s["notify"].Status)
	require.Equal(t, StepSuccess, s["audit"].Status)
	require.Equal(t, map[string]any{"plan": nil}, h.reqs("archive")[0].Input)
	require.Empty(t, h.reqs("notify")[0].Checkpoints, "a skipped step leaves no checkpoint to layer")
}

func TestUpstreamFailure(t *testing.T) {
	h := newHarness(t)
	p := testPlan(
		tool("validate"),
		tool("send", "validate"),
		tool("confirm", "send"),      // transitively upstream_failed
		tool("escalate", "validate"), // has an `if` that handles the failure
		tool("independent"),
	)
	p.Steps[3].If = "{{ .steps.validate.status == 'failed' }}"
	h.onStep("validate", fail(activities.ErrTypeInvalidInput, "bad customer"))
	h.onStep("escalate", succeed(map[string]any{"ticket": "T-1"}))
	h.onStep("independent", succeed(map[string]any{}))

	o := h.run(Input{Plan: p})
	require.Equal(t, ErrTypeAgentFailed, o.errType())
	require.Equal(t, RunFailed, o.result.Status)
	require.Contains(t, o.result.Error, `step "validate" failed`)
	require.Contains(t, o.result.Error, "bad customer")
	s := o.steps()
	require.Equal(t, StepFailed, s["validate"].Status)
	require.Equal(t, "cp-failed-validate", s["validate"].CheckpointID)
	require.EqualValues(t, 1, s["validate"].Attempts)
	require.Equal(t, StepSkipped, s["send"].Status)
	require.Equal(t, ReasonUpstreamFailed, s["send"].Reason)
	require.Equal(t, StepSkipped, s["confirm"].Status)
	require.Equal(t, ReasonUpstreamFailed, s["confirm"].Reason)
	require.Equal(t, StepSuccess, s["escalate"].Status)
	require.Equal(t, StepSuccess, s["independent"].Status)
	require.Equal(t, "5/5", o.status.Progress)
	require.Equal(t, RunFailed, o.status.Status)
	require.Len(t, h.finished, 1)
	require.Equal(t, RunFailed, h.finished[0].Status)
}

// TestLegacyRetryPolicy pins the branch before changeInfraRetries, which
// open runs recorded with it still take: Temporal's RetryPolicy retries the
// one activity execution, and every retryable failure counts against
// `retries`. The current branch is tested in attempts_test.go.
func TestLegacyRetryPolicy(t *testing.T) {
	tests := []struct {
		name         string
		retries      int
		fn           stepFn
		wantCalls    int
		wantAttempts int32
		wantErr      string
	}{
		{
			name: "retryable error exhausts retries", retries: 2,
			fn: fail(activities.ErrTypeToolFailed, "exit status 3"), wantCalls: 3, wantAttempts: 3,
			wantErr: "ToolFailed: exit status 3",
		},
		{
			name: "attempts from retry state when details are missing", retries: 1,
			fn: func(context.Context, activities.StepRequest) (*activities.StepResult, error) {
				return nil, temporal.NewApplicationError("sandbox died", activities.ErrTypeSandboxLost)
			},
			wantCalls: 2, wantAttempts: 2, wantErr: "SandboxLost: sandbox died",
		},
		{
			name: "policy violation is not retried", retries: 3,
			fn: fail(activities.ErrTypePolicy, "env name looks like a secret"), wantCalls: 1, wantAttempts: 1,
			wantErr: "PolicyViolation: env name looks like a secret",
		},
		{
			name: "invalid input is not retried", retries: 3,
			fn: fail(activities.ErrTypeInvalidInput, "secret not found"), wantCalls: 1, wantAttempts: 1,
			wantErr: "InvalidInput: secret not found",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.legacyRetries()
			p := testPlan(tool("flaky"))
			p.Steps[0].Retries = tc.retries
			h.onStep("flaky", tc.fn).Times(tc.wantCalls)
			o := h.run(Input{Plan: p})
			require.Equal(t, ErrTypeAgentFailed, o.errType())
			rec := o.steps()["flaky"]
			require.Equal(t, StepFailed, rec.Status)
			require.Equal(t, tc.wantAttempts, rec.Attempts)
			require.Equal(t, tc.wantErr, rec.Error)
			require.Len(t, h.reqs("flaky"), tc.wantCalls)
		})
	}
}

func TestRetryThenSuccess(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "current", true: "legacy"}[legacy], func(t *testing.T) {
			h := newHarness(t)
			if legacy {
				h.legacyRetries()
			}
			p := testPlan(tool("flaky"))
			p.Steps[0].Retries = 2
			h.onStep("flaky", func(ctx context.Context, req activities.StepRequest) (*activities.StepResult, error) {
				if attemptOf(ctx, req) < 3 {
					return fail(activities.ErrTypeTimeout, "deadline")(ctx, req)
				}
				return succeed(map[string]any{"ok": true})(ctx, req)
			}).Times(3)
			o := h.run(Input{Plan: p})
			require.NoError(t, o.err)
			require.EqualValues(t, 3, o.steps()["flaky"].Attempts)
		})
	}
}

func TestContinueOnError(t *testing.T) {
	h := newHarness(t)
	p := testPlan(tool("optional"), tool("next", "optional"))
	p.Steps[0].ContinueOnError = true
	p.Steps[1].Inputs = map[string]any{"prev": "{{ .steps.optional.status }}"}
	h.onStep("optional", fail(activities.ErrTypeToolFailed, "exit 1"))
	h.onStep("next", succeed(map[string]any{}))
	o := h.run(Input{Plan: p})
	require.NoError(t, o.err)
	require.Equal(t, RunSucceeded, o.result.Status)
	s := o.steps()
	require.Equal(t, StepFailed, s["optional"].Status)
	require.Equal(t, StepSuccess, s["next"].Status)
	require.Equal(t, map[string]any{"prev": "failed"}, h.reqs("next")[0].Input)
	require.Equal(t, []string{"cp-failed-optional"}, h.reqs("next")[0].Checkpoints,
		"a failed attempt's checkpoint is layered for a continue_on_error dependent")
}

func TestOutputExpressionFailure(t *testing.T) {
	h := newHarness(t)
	p := testPlan(tool("count"))
	p.Outputs = []spec.OutputDecl{
		{Name: "total", Value: "{{ .steps.count.output.n }}"},
		{Name: "ratio", Value: "{{ .steps.count.output.n / 0 }}"},
	}
	h.onStep("count", succeed(map[string]any{"n": 4}))
	o := h.run(Input{Plan: p})
	require.Equal(t, ErrTypeAgentFailed, o.errType())
	require.Equal(t, RunFailed, o.result.Status)
	require.Contains(t, o.result.Error, `output "ratio"`)
	require.Contains(t, o.result.Error, "division by zero")
	require.Equal(t, map[string]any{"total": float64(4)}, o.result.Outputs, "outputs that evaluated are kept")
	require.Equal(t, StepSuccess, o.steps()["count"].Status)
}

func TestCancelMidStep(t *testing.T) {
	h := newHarness(t)
	p := testPlan(tool("quick"), tool("slow", "quick"), tool("after", "slow"), approvalStep("gate", 0, "quick"))
	h.onStep("quick", succeed(map[string]any{}))
	// Far longer than the cancel point, in workflow time.
	h.onStep("slow", succeed(map[string]any{})).After(24 * time.Hour)
	var mid *Status
	h.env.RegisterDelayedCallback(func() {
		mid = h.query()
		h.env.CancelWorkflow()
	}, time.Minute)
	o := h.run(Input{Plan: p})

	var canceled *temporal.CanceledError
	require.True(t, errors.As(o.err, &canceled), "got %v", o.err)
	require.Equal(t, RunCanceled, o.result.Status)
	require.Equal(t, RunRunning, mid.Status)
	require.Equal(t, "slow", mid.CurrentStep)
	require.Equal(t, StepWaitingApproval, mid.StepHistory[2].Status)

	s := o.steps()
	require.Equal(t, StepSuccess, s["quick"].Status)
	require.Equal(t, StepCanceled, s["slow"].Status)
	require.Equal(t, StepCanceled, s["gate"].Status)
	require.Equal(t, StepCanceled, s["after"].Status)
	require.Equal(t, RunCanceled, o.status.Status)
	require.Len(t, h.finished, 1, "RunFinished still runs after cancel")
	require.Equal(t, RunCanceled, h.finished[0].Status)
}

func TestRenderErrorFailsStepWithoutRunning(t *testing.T) {
	h := newHarness(t)
	p := testPlan(tool("a"), tool("b", "a"))
	p.Steps[1].Inputs = map[string]any{"x": "{{ .steps.a.output.n - 'text' }}"}
	h.onStep("a", succeed(map[string]any{"n": 1}))
	o := h.run(Input{Plan: p})
	require.Equal(t, ErrTypeAgentFailed, o.errType())
	rec := o.steps()["b"]
	require.Equal(t, StepFailed, rec.Status)
	require.Contains(t, rec.Error, "render inputs")
	require.Zero(t, rec.Attempts)
	require.Empty(t, h.reqs("b"), "RunStep must not be called")
}

func TestIfEvaluationErrorFailsStep(t *testing.T) {
	h := newHarness(t)
	p := testPlan(tool("a"), tool("b", "a"))
	p.Steps[1].If = "{{ .steps.a.output.n > 'x' }}"
	h.onStep("a", succeed(map[string]any{"n": 1}))
	o := h.run(Input{Plan: p})
	require.Equal(t, ErrTypeAgentFailed, o.errType())
	require.Equal(t, StepFailed, o.steps()["b"].Status)
	require.Contains(t, o.steps()["b"].Error, "if:")
}

func TestRunInputValidation(t *testing.T) {
	h := newHarness(t)
	p := testPlan(tool("a"))
	p.Inputs = []spec.InputDecl{
		{Name: "email_id", Type: spec.TypeString, Required: true},
		{Name: "limit", Type: spec.TypeNumber, Default: 10},
	}
	o := h.run(Input{Plan: p, Inputs: map[string]any{"limit": "ten"}})
	require.Equal(t, ErrTypeAgentFailed, o.errType())
	require.Equal(t, RunFailed, o.result.Status)
	require.Contains(t, o.result.Error, `input "email_id" is required`)
	require.Contains(t, o.result.Error, `input "limit" must be a number, got string`)
	require.Empty(t, o.status.StepHistory)
	require.Equal(t, "0/1", o.status.Progress)
	require.Empty(t, h.reqs("a"))
}

func TestUnsupportedPlanSchema(t *testing.T) {
	h := newHarness(t)
	p := testPlan(tool("a"))
	p.SchemaVersion = spec.PlanSchemaVersion + 1
	o := h.run(Input{Plan: p})
	require.Equal(t, ErrTypeUnsupportedPlan, o.errType())
	require.Contains(t, o.result.Error, "schema version 2 is not supported")
	require.Empty(t, h.reqs("a"))
}

func TestInvalidPlanFails(t *testing.T) {
	h := newHarness(t)
	p := testPlan(tool("a", "b"), tool("b", "a"))
	o := h.run(Input{Plan: p})
	require.Equal(t, ErrTypeAgentFailed, o.errType())
	require.Contains(t, o.result.Error, "dependency cycle")
}

// TestPlanWithoutStepTimeoutFails: the compiled Plan is authoritative for
// the time budget. A hand-built Plan whose tool step has no timeout fails
// the run before any step runs, instead of getting a default from the
// workflow.
func TestPlanWithoutStepTimeoutFails(t *testing.T) {
	h := newHarness(t)
	b := tool("b", "a")
	b.Timeout = 0
	o := h.run(Input{Plan: testPlan(tool("a"), b)})
	require.Equal(t, ErrTypeAgentFailed, o.errType())
	require.Contains(t, o.result.Error, `invalid plan: tool step "b" has no timeout`)
	require.Empty(t, h.reqs("a"), "no step may run under a plan that fails its checks")
	require.Empty(t, h.reqs("b"))
}

func TestResumeRunUsesCarry(t *testing.T) {
	h := newHarness(t)
	p := testPlan(tool("fetch"), tool("summarize", "fetch"))
	p.Steps[1].Inputs = map[string]any{"text": "{{ .steps.fetch.output.body }}"}
	h.onStep("summarize", succeed(map[string]any{"summary": "s"})).Once()
	carried := StepRecord{ID: "fetch", Status: StepSuccess, Attempts: 2, CheckpointID: "cp-old", Output: map[string]any{"body": "from before"},
		AttemptHistory: []AttemptRecord{
			{Attempt: 1, Status: AttemptFailed, Class: ClassInfrastructure, Type: "WorkerLost", StartedAt: time.Unix(0, 0).UTC()},
			{Attempt: 2, Status: AttemptSuccess, Worker: "w-b", StartedAt: time.Unix(30, 0).UTC()},
		}}
	o := h.run(Input{Plan: p, Carry: map[string]StepRecord{"fetch": carried}, ResumedFrom: "run-1"})
	require.NoError(t, o.err)
	require.Empty(t, h.reqs("fetch"), "carried steps are not run")
	req := h.reqs("summarize")[0]
	require.Equal(t, map[string]any{"text": "from before"}, req.Input)
	require.Equal(t, []string{"cp-old"}, req.Checkpoints)
	s := o.steps()
	require.True(t, s["fetch"].Carried)
	require.EqualValues(t, 2, s["fetch"].Attempts)
	require.Equal(t, carried.AttemptHistory, s["fetch"].AttemptHistory, "a carried step keeps the attempts of its run")
	require.False(t, s["summarize"].Carried)
	require.Equal(t, []attemptView{{1, AttemptSuccess, "", "", ""}}, views(s["summarize"].AttemptHistory))
	require.Equal(t, "run-1", o.status.ResumedFrom)
	require.Equal(t, []string{"fetch", "summarize"}, historyIDs(o.status))
}

// Neither the end metrics (RunEnded) nor webhook delivery (RunFinished,
// retried on its own policy) failing changes the run's outcome.
func TestRunEndFailuresDoNotChangeOutcome(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		endedErr, finishedErr error
		finishedCalls         int
	}{
		{"delivery fails", nil, errors.New("webhook unreachable"), 5},
		{"metrics fail", errors.New("metrics broken"), nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ts testsuite.WorkflowTestSuite
			env := testenv.WorkflowEnv(&ts)
			env.RegisterWorkflowWithOptions(AgentWorkflow, workflow.RegisterOptions{Name: WorkflowName})
			env.OnActivity(acts.RunEnded, mock.Anything, mock.Anything).Return(false, tc.endedErr).Once()
			env.OnActivity(acts.RunFinished, mock.Anything, mock.Anything).Return(tc.finishedErr).Times(tc.finishedCalls)
			env.OnActivity(acts.RunStep, mock.Anything, mock.Anything).Return(&activities.StepResult{Output: map[string]any{}, Attempt: 1}, nil)
			p := testPlan(tool("a"))
			p.Notify = []string{"https://hooks.example/run"}
			env.ExecuteWorkflow(WorkflowName, Input{Plan: p})
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			var res Result
			require.NoError(t, env.GetWorkflowResult(&res))
			require.Equal(t, RunSucceeded, res.Status)
			env.AssertExpectations(t)
		})
	}
}

// The run's end is counted once, by the local RunEnded; RunFinished runs
// only when there is somewhere to deliver: the spec's notify URLs or the
// worker's own webhooks (changeInfraRetries v2).
func TestRunFinishedOnlyToDeliver(t *testing.T) {
	for _, tc := range []struct {
		name           string
		notify         []string
		workerWebhooks bool
		delivered      bool
	}{
		{"no webhooks anywhere", nil, false, false},
		{"the spec's notify", []string{"https://hooks.example/run"}, false, true},
		{"the worker's --webhook-url", nil, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.workerWebhooks = tc.workerWebhooks
			h.onStep("a", succeed(map[string]any{}))
			p := testPlan(tool("a"))
			p.Notify = tc.notify
			o := h.run(Input{Plan: p})
			require.Equal(t, RunSucceeded, o.result.Status)
			require.Len(t, h.finished, 1, "the run's end is counted once")
			require.False(t, h.finished[0].MetricsRecorded)
			if !tc.delivered {
				require.Empty(t, h.delivered)
				return
			}
			require.Len(t, h.delivered, 1)
			require.True(t, h.delivered[0].MetricsRecorded, "RunFinished must not count the run again")
			require.Equal(t, tc.notify, h.delivered[0].Webhooks)
		})
	}
}

func TestStepCanceledWithoutRunCancelFailsRun(t *testing.T) {
	h := newHarness(t)
	p := testPlan(tool("a"), tool("b", "a"))
	h.onStep("a", func(context.Context, activities.StepRequest) (*activities.StepResult, error) {
		return nil, temporal.NewCanceledError("activity canceled on its own")
	})
	o := h.run(Input{Plan: p})
	require.Equal(t, ErrTypeAgentFailed, o.errType())
	require.Equal(t, `step "a" canceled`, o.result.Error)
	require.Equal(t, ReasonUpstreamFailed, o.steps()["b"].Reason)
}

// TestZeroDurationStepKeepsDurationField: a step that took 0 ms still has
// duration_ms in the inspect document (as the seed's document always does);
// 0 is a duration, not an absent value.
func TestZeroDurationStepKeepsDurationField(t *testing.T) {
	h := newHarness(t)
	h.onStep("a", succeed(map[string]any{"ok": true}))
	o := h.run(Input{Plan: testPlan(tool("a"))})
	require.NoError(t, o.err)
	rec := o.steps()["a"]
	require.Equal(t, StepSuccess, rec.Status)
	// The test environment's clock does not move without timers: the step
	// took 0 ms, which is the case omitempty used to drop.
	require.Zero(t, rec.DurationMS)

	v, err := h.env.QueryWorkflow(StatusQuery)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, v.Get(&doc))
	history, ok := doc["step_history"].([]any)
	require.True(t, ok, "step_history: %v", doc["step_history"])
	require.Len(t, history, 1)
	step := history[0].(map[string]any)
	require.Contains(t, step, "duration_ms")
	require.EqualValues(t, 0, step["duration_ms"])

	b, err := json.Marshal(rec)
	require.NoError(t, err)
	require.Contains(t, string(b), `"duration_ms":0`)
}
