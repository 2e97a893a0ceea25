package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/expr"
	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/internal/spec"
)

// stepActivityOptions are the options of one tool step: the attempt's time
// budget derived from the Plan's per-attempt timeout (activities.BudgetFor,
// the same function RunStep derives the tool deadline and sandbox runtime
// from), exponential-backoff retries up to `retries`, policy and input
// errors never retried, and cancellation that waits for the sandbox to be
// torn down. checkPlan has refused a tool step without a timeout. The
// RetryPolicy serves runs before changeInfraRetries; current runs replace
// it (attemptActivityOptions) and retry in the workflow.
func stepActivityOptions(ps *spec.PlanStep) workflow.ActivityOptions {
	b := activities.BudgetFor(ps.Timeout)
	retries := max(ps.Retries, 0)
	return workflow.ActivityOptions{
		StartToCloseTimeout: b.StartToClose,
		HeartbeatTimeout:    b.Heartbeat,
		WaitForCancellation: true,
		Summary:             stepSummary(ps),
		Priority:            stepPriority(ps, 1),
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        time.Minute,
			MaximumAttempts:        int32(retries + 1),
			NonRetryableErrorTypes: failure.NonRetryableTypes(),
		},
	}
}

// GPUTaskQueue is the task queue of the GPU steps of runs on taskQueue:
// only workers that serve GPUs poll it (worker --gpus), so a GPU step waits
// in Temporal, visibly, until such a worker has a free GPU, instead of
// failing on (or overcommitting) whichever worker polled first.
func GPUTaskQueue(taskQueue string) string { return taskQueue + "-gpu" }

// routeGPU sends a step that requests GPUs to its run's GPU task queue.
// Replay does not compare an activity's task queue (only its ID and type),
// so like priorities this needs no version gate; a run recorded before it
// schedules its later GPU steps on the GPU queue too, which is the point.
func routeGPU(ctx workflow.Context, ps *spec.PlanStep, opts workflow.ActivityOptions) workflow.ActivityOptions {
	if ps.Resources.GPUs != 0 {
		opts.TaskQueue = GPUTaskQueue(workflow.GetInfo(ctx).TaskQueueName)
	}
	return opts
}

// Priorities of agentflow's activity tasks (Temporal task queue priority:
// a lower key is dispatched first when tasks back up). A run that has
// started finishes before new runs start: its later steps and its retries
// go before any run's first step, and its RunFinished before both. Under
// a burst of runs, a FIFO queue would make every run's second step wait
// behind every run's first (docs/BENCHMARKS.md). Replay does not compare
// priorities, so no version gate is needed.
const (
	priorityFinish  = 1
	priorityStarted = 2
	priorityRoot    = 3 // the server's default
)

// stepPriority is the priority of attempt n of step ps.
func stepPriority(ps *spec.PlanStep, n int32) temporal.Priority {
	if len(ps.DependsOn) == 0 && n <= 1 {
		return temporal.Priority{PriorityKey: priorityRoot}
	}
	return temporal.Priority{PriorityKey: priorityStarted}
}

// stepSummary is what the Web UI shows for the activity: step and tool.
func stepSummary(ps *spec.PlanStep) string {
	what := ps.Tool
	if what == "" {
		what = ps.Image
	}
	return ps.ID + " · " + what
}

// runFinishedOptions: webhook delivery and metrics get a few quick retries;
// their failure never changes the run's status.
var runFinishedOptions = workflow.ActivityOptions{
	StartToCloseTimeout: time.Minute,
	Summary:             "run finished",
	Priority:            temporal.Priority{PriorityKey: priorityFinish},
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    30 * time.Second,
		MaximumAttempts:    5,
	},
}

// runEndedOptions: the run's end metrics, once (a counter must not count
// a retry), bounded well inside a workflow task.
var runEndedOptions = workflow.LocalActivityOptions{
	StartToCloseTimeout: 5 * time.Second,
	RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
}

// RenderError is a step's inputs or env whose templates failed to
// evaluate; the step fails without running (retrying cannot help).
type RenderError struct {
	Field string // "inputs" or "env"
	Err   error
}

func (e *RenderError) Error() string { return fmt.Sprintf("render %s: %v", e.Field, e.Err) }
func (e *RenderError) Unwrap() error { return e.Err }

// stepRequest renders a tool step's inputs and env against the current
// state and assembles the activity input. expr.RenderValue walks maps in
// sorted key order, so the first error reported is deterministic, and
// leaves whole-secret strings verbatim for the worker.
func (s *runState) stepRequest(st *stepState, now time.Time) (*activities.StepRequest, error) {
	ps := st.plan
	env := s.exprEnv(now)
	input := map[string]any{}
	if len(ps.Inputs) > 0 {
		v, err := expr.RenderValue(ps.Inputs, env)
		if err != nil {
			return nil, &RenderError{Field: "inputs", Err: err}
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, &RenderError{Field: "inputs", Err: fmt.Errorf("rendered to %T, want an object", v)}
		}
		input = m
	}
	var envOut map[string]string
	if len(ps.Env) > 0 {
		v, err := expr.RenderValue(ps.Env, env)
		if err != nil {
			return nil, &RenderError{Field: "env", Err: err}
		}
		m, ok := v.(map[string]string)
		if !ok {
			return nil, &RenderError{Field: "env", Err: fmt.Errorf("rendered to %T, want string values", v)}
		}
		envOut = m
	}
	req := &activities.StepRequest{
		AgentID:   s.agentID,
		RunID:     s.runID,
		StepID:    ps.ID,
		Tool:      ps.Tool,
		Image:     ps.Image,
		Input:     input,
		Env:       envOut,
		Resources: ps.Resources,
		Timeout:   ps.Timeout,
		// Header values stay templates ({{ .secrets.NAME }}): substituted
		// on the worker, into the proxy's configuration only.
		Egress: ps.Egress,
	}
	if len(ps.Secrets) > 0 {
		req.SecretSources = make(map[string]string, len(ps.Secrets))
		for _, name := range ps.Secrets {
			for _, d := range s.plan.Secrets {
				if d.Name == name {
					req.SecretSources[name] = d.Source
				}
			}
		}
	}
	req.Git, req.Checkpoints = s.workspace(ps)
	return req, nil
}

// workspace is where a step starts (SPEC §5): a root step from the spec's
// workspace; any other step from its dependencies' checkpoints, explicit
// depends_on first in written order, then implicit dependencies, later
// layers winning. Approval steps have no sandbox, so they are transparent:
// they pass on the layers their own dependencies produced. Steps that left
// no checkpoint (skipped, failed before running) contribute nothing.
func (s *runState) workspace(ps *spec.PlanStep) (*spec.GitWorkspace, []string) {
	if len(ps.DependsOn) == 0 {
		return s.plan.Workspace, nil
	}
	return nil, dedupeKeepLast(s.layers(ps, 0))
}

func (s *runState) layers(ps *spec.PlanStep, depth int) []string {
	if depth > len(s.steps) { // impossible on an acyclic plan; a guard, not a rule
		return nil
	}
	var out []string
	for _, dep := range layerOrder(ps) {
		d := s.byID[dep]
		switch {
		case d.rec.CheckpointID != "":
			out = append(out, d.rec.CheckpointID)
		case d.plan.Approval != nil && d.rec.Status == StepSuccess:
			out = append(out, s.layers(d.plan, depth+1)...)
		}
	}
	return out
}

// layerOrder is ExplicitDependsOn followed by the implicit dependencies.
func layerOrder(ps *spec.PlanStep) []string {
	out := slices.Clone(ps.ExplicitDependsOn)
	for _, dep := range ps.DependsOn {
		if !slices.Contains(out, dep) {
			out = append(out, dep)
		}
	}
	return out
}

// dedupeKeepLast keeps the last occurrence of each layer: with later layers
// winning, an earlier duplicate changes nothing.
func dedupeKeepLast(in []string) []string {
	var out []string
	for i, id := range in {
		if !slices.Contains(in[i+1:], id) {
			out = append(out, id)
		}
	}
	return out
}

// attemptOutcome is what the workflow learns from a finished RunStep call.
type attemptOutcome struct {
	status     string
	errMsg     string
	attempts   int32
	checkpoint string
}

// classifyStepError maps the error of a RunStep future to the step's
// terminal state, for runs before changeInfraRetries (current runs classify
// each attempt with classifyAttempt). The attempt count comes from StepFailureDetails when the
// activity attached them; otherwise an exhausted retry policy means every
// attempt ran.
func classifyStepError(err error, ps *spec.PlanStep) attemptOutcome {
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		return attemptOutcome{status: StepCanceled}
	}
	out := attemptOutcome{status: StepFailed, errMsg: err.Error(), attempts: 1}
	var appErr *temporal.ApplicationError
	hasApp := errors.As(err, &appErr)
	retryable := !hasApp || (!appErr.NonRetryable() && !slices.Contains(failure.NonRetryableTypes(), appErr.Type()))
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) {
		if cause := errors.Unwrap(actErr); cause != nil {
			out.errMsg = cause.Error()
		}
		switch actErr.RetryState() {
		case enumspb.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED:
			out.attempts = int32(max(ps.Retries, 0) + 1)
		case enumspb.RETRY_STATE_NON_RETRYABLE_FAILURE, enumspb.RETRY_STATE_TIMEOUT:
		default:
			// The only way a retryable failure ends the activity (no
			// ScheduleToClose is set) is an exhausted retry policy.
			if retryable {
				out.attempts = int32(max(ps.Retries, 0) + 1)
			}
		}
	}
	if hasApp {
		out.errMsg = appErr.Message()
		if appErr.Type() != "" {
			out.errMsg = appErr.Type() + ": " + appErr.Message()
		}
		var details activities.StepFailureDetails
		if appErr.HasDetails() && appErr.Details(&details) == nil {
			if details.Attempt > 0 {
				out.attempts = details.Attempt
			}
			out.checkpoint = details.CheckpointID
		}
	}
	var timeoutErr *temporal.TimeoutError
	if errors.As(err, &timeoutErr) && !hasApp {
		out.errMsg = "attempt timed out (" + timeoutErr.TimeoutType().String() + ")"
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
