// Package workflows holds AgentWorkflow, the one generic Temporal workflow
// that interprets a compiled spec.Plan: it schedules the DAG (SPEC §5),
// runs each tool step as one RunStep activity, waits for approvals, and
// keeps the inspect document (SPEC §6) current for the `status` query.
//
// Everything here is workflow code: deterministic, no map iteration that
// reaches commands, no wall clock (workflow.Now), logging only through
// workflow.GetLogger. See versions.go before changing behaviour.
package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/expr"
	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/internal/metrics"
	"github.com/agentflow/agentflow/internal/spec"
)

// acts is only used for method values: activities are called by the name
// of the method, the worker registers a real *activities.Activities.
var acts *activities.Activities

var (
	saAgentName = temporal.NewSearchAttributeKeyKeyword(SearchAttrAgentName)
	saSpec      = temporal.NewSearchAttributeKeyKeyword(SearchAttrSpec)
	saStatus    = temporal.NewSearchAttributeKeyKeyword(SearchAttrStatus)
)

// runner drives one run. All fields are touched only from workflow
// coroutines, which Temporal runs one at a time.
type runner struct {
	s      *runState
	logger log.Logger
	// done receives a step ID whenever a step goroutine finishes.
	done     workflow.Channel
	running  int
	canceled bool
	// infraRetries: this run is on changeInfraRetries v1 or later (attempts.go);
	// otherwise one RunStep execution per step under a RetryPolicy.
	infraRetries bool
	// runEndedLocal: changeInfraRetries v2, the run's end metrics in a
	// local activity, RunFinished only to deliver webhooks (end).
	runEndedLocal bool
	// saEnabled is set when the starter put our search attributes on the
	// run, which proves the namespace has them registered; upserting an
	// unregistered attribute would fail every workflow task of the run.
	saEnabled bool
}

// AgentWorkflow runs one agent (SPEC §5). It returns the Result on
// SUCCEEDED; on FAILED a non-retryable ApplicationError of type
// ErrTypeAgentFailed (details: the Result) so the Web UI shows the run as
// Failed; on cancel a CanceledError (details: the Result) so Temporal
// records it as Canceled. The status query serves the inspect document in
// every state, including after the run closed.
func AgentWorkflow(ctx workflow.Context, in Input) (*Result, error) {
	info := workflow.GetInfo(ctx)
	s := newRunState(&in.Plan)
	s.agentID = info.WorkflowExecution.ID
	s.runID = info.WorkflowExecution.RunID
	s.resumedFrom = in.ResumedFrom
	s.startedAt = info.WorkflowStartTime
	s.inputs = in.Inputs
	r := &runner{
		s:      s,
		logger: log.With(workflow.GetLogger(ctx), "spec", in.Plan.Name),
		done:   workflow.NewBufferedChannel(ctx, len(in.Plan.Steps)),
	}
	if err := workflow.SetQueryHandler(ctx, StatusQuery, func() (*Status, error) {
		return s.doc(), nil
	}); err != nil {
		return nil, fmt.Errorf("register %s query: %w", StatusQuery, err)
	}
	// Read once, here, so a run keeps one interpretation for its whole
	// life; see versions.go.
	infra := workflow.GetVersion(ctx, changeInfraRetries, workflow.DefaultVersion, changeInfraRetriesVersion)
	r.infraRetries = infra >= versionInfraRetries
	r.runEndedLocal = infra >= versionRunEndedLocal

	r.initVisibility(ctx, &in.Plan, info)
	// Counted through the SDK's handler so replays do not count it again;
	// the worker bridges it onto its Prometheus registry.
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"spec": in.Plan.Name}).
		Counter(metrics.RunStartedTotal).Inc(1)

	if in.Plan.SchemaVersion != spec.PlanSchemaVersion {
		return r.end(ctx, &PlanError{Msg: fmt.Sprintf(
			"schema version %d is not supported by this worker (supports %d)",
			in.Plan.SchemaVersion, spec.PlanSchemaVersion)}, ErrTypeUnsupportedPlan)
	}
	if err := checkPlan(&in.Plan); err != nil {
		return r.end(ctx, err, ErrTypeAgentFailed)
	}
	inputs, err := ResolveInputs(&in.Plan, in.Inputs)
	if err != nil {
		return r.end(ctx, err, ErrTypeAgentFailed)
	}
	s.inputs = inputs
	r.applyCarry(in.Carry)
	r.loop(ctx)
	return r.end(ctx, nil, ErrTypeAgentFailed)
}

// initVisibility sets the memo and search attributes the starter did not
// set, so runs started by other clients still read well in the Web UI.
func (r *runner) initVisibility(ctx workflow.Context, plan *spec.Plan, info *workflow.Info) {
	if info.Memo.GetFields()[MemoSpecName] == nil {
		if err := workflow.UpsertMemo(ctx, map[string]any{
			MemoSpecName: plan.Name, MemoSpecVersion: plan.Version,
		}); err != nil {
			r.logger.Warn("memo upsert failed", "error", err)
		}
	}
	sa := workflow.GetTypedSearchAttributes(ctx)
	r.saEnabled = sa.ContainsKey(saAgentName) || sa.ContainsKey(saSpec) || sa.ContainsKey(saStatus)
	if !r.saEnabled {
		r.logger.Info("search attributes not set at start; not upserting them")
		return
	}
	var updates []temporal.SearchAttributeUpdate
	if !sa.ContainsKey(saAgentName) {
		updates = append(updates, saAgentName.ValueSet(info.WorkflowExecution.ID))
	}
	if !sa.ContainsKey(saSpec) {
		updates = append(updates, saSpec.ValueSet(plan.Name))
	}
	if v, _ := sa.GetKeyword(saStatus); v != RunPending {
		updates = append(updates, saStatus.ValueSet(RunPending))
	}
	if len(updates) > 0 {
		if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
			r.logger.Warn("search attribute upsert failed", "error", err)
		}
	}
}

// setRunStatus changes the run status and keeps AgentStatus current.
func (r *runner) setRunStatus(ctx workflow.Context, status string) {
	if r.s.status == status {
		return
	}
	r.logger.Info("run status", "from", r.s.status, "to", status)
	r.s.status = status
	if !r.saEnabled {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, saStatus.ValueSet(status)); err != nil {
		r.logger.Warn("search attribute upsert failed", "error", err)
	}
}

// applyCarry takes resumed steps as they were (only terminal records).
func (r *runner) applyCarry(carry map[string]StepRecord) {
	for _, st := range r.s.steps {
		rec, ok := carry[st.rec.ID]
		if !ok || !isTerminal(rec.Status) {
			continue
		}
		rec.ID = st.rec.ID
		rec.Carried = true
		st.rec = rec
		r.s.history = append(r.s.history, rec.ID)
	}
}

// loop schedules ready steps and reacts to completions, approval signals
// and cancellation until every step is terminal (or, after a cancel, until
// every running step has wound down).
func (r *runner) loop(ctx workflow.Context) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	signals := workflow.GetSignalChannel(ctx, ApprovalSignal)
	for {
		if !r.canceled {
			r.schedule(ctx)
		}
		if r.s.allTerminal() {
			return
		}
		if r.running == 0 {
			if r.canceled {
				r.cancelPending(workflow.Now(dctx))
				return
			}
			// checkPlan rules this out; fail loudly rather than hang.
			r.failPending(workflow.Now(dctx), "unschedulable: dependencies never finish")
			return
		}
		sel := workflow.NewSelector(dctx)
		sel.AddReceive(r.done, func(c workflow.ReceiveChannel, _ bool) {
			var id string
			c.Receive(dctx, &id)
			r.running--
		})
		sel.AddReceive(signals, func(c workflow.ReceiveChannel, _ bool) {
			var d ApprovalDecision
			c.Receive(dctx, &d)
			r.onApproval(d)
		})
		if !r.canceled {
			sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {
				r.canceled = true
				r.logger.Info("run cancel requested", "running_steps", r.running)
			})
		}
		sel.Select(dctx)
	}
}

// schedule makes passes over the steps in spec order until nothing
// changes: skips and failures can unblock later steps within one pass.
func (r *runner) schedule(ctx workflow.Context) {
	now := workflow.Now(ctx)
	for changed := true; changed; {
		changed = false
		for _, st := range r.s.steps {
			if st.rec.Status != StepPending {
				continue
			}
			d := r.s.decide(st, now)
			if d.act == actWait {
				continue
			}
			changed = true
			r.setRunStatus(ctx, RunRunning)
			switch d.act {
			case actSkip:
				r.s.finish(st, StepSkipped, d.reason, "", now)
				r.logger.Info("step skipped", "step_id", st.rec.ID, "reason", d.reason)
			case actFail:
				r.s.finish(st, StepFailed, "", d.err, now)
				r.logger.Warn("step failed before running", "step_id", st.rec.ID, "error", d.err)
			case actStart:
				r.start(ctx, st, now)
			}
		}
	}
}

func (r *runner) start(ctx workflow.Context, st *stepState, now time.Time) {
	if st.plan.Approval != nil {
		r.s.start(st, StepWaitingApproval, now)
		r.running++
		r.logger.Info("step waiting for approval", "step_id", st.rec.ID)
		workflow.Go(ctx, func(gctx workflow.Context) {
			r.runApproval(gctx, st)
			r.done.SendAsync(st.rec.ID)
		})
		return
	}
	req, err := r.s.stepRequest(st, now)
	if err != nil {
		r.s.finish(st, StepFailed, "", err.Error(), now)
		r.logger.Warn("step failed before running", "step_id", st.rec.ID, "error", err)
		return
	}
	r.s.start(st, StepRunning, now)
	r.running++
	r.logger.Info("step started", "step_id", st.rec.ID, "tool", st.plan.Tool, "image", st.plan.Image)
	if r.infraRetries {
		workflow.Go(ctx, func(gctx workflow.Context) {
			r.runAttempts(gctx, st, *req)
			r.done.SendAsync(st.rec.ID)
		})
		return
	}
	// Runs recorded before changeInfraRetries: Temporal retries the one
	// activity execution.
	workflow.Go(ctx, func(gctx workflow.Context) {
		actx := workflow.WithActivityOptions(gctx, routeGPU(gctx, st.plan, stepActivityOptions(st.plan)))
		var res activities.StepResult
		err := workflow.ExecuteActivity(actx, acts.RunStep, *req).Get(actx, &res)
		r.completeTool(st, &res, err, workflow.Now(gctx))
		r.done.SendAsync(st.rec.ID)
	})
}

// completeTool settles a step of a run before changeInfraRetries.
func (r *runner) completeTool(st *stepState, res *activities.StepResult, err error, now time.Time) {
	if err == nil {
		st.rec.Output = res.Output
		st.rec.CheckpointID = res.CheckpointID
		st.rec.Attempts = max(res.Attempt, 1)
		r.s.finish(st, StepSuccess, "", "", now)
		r.logger.Info("step succeeded", "step_id", st.rec.ID, "attempts", st.rec.Attempts)
		return
	}
	o := classifyStepError(err, st.plan)
	st.rec.Attempts = o.attempts
	st.rec.CheckpointID = o.checkpoint
	r.s.finish(st, o.status, "", o.errMsg, now)
	r.logger.Warn("step ended", "step_id", st.rec.ID, "step_status", o.status, "attempts", o.attempts, "error", o.errMsg)
}

func (r *runner) cancelPending(now time.Time) {
	for _, st := range r.s.steps {
		if !isTerminal(st.rec.Status) {
			r.s.finish(st, StepCanceled, "", "", now)
		}
	}
}

func (r *runner) failPending(now time.Time, msg string) {
	for _, st := range r.s.steps {
		if !isTerminal(st.rec.Status) {
			r.s.finish(st, StepFailed, "", msg, now)
		}
	}
}

// evalOutputs evaluates the spec outputs in order against the final state.
func (r *runner) evalOutputs(now time.Time) (map[string]any, []string) {
	if len(r.s.plan.Outputs) == 0 {
		return nil, nil
	}
	env := r.s.exprEnv(now)
	out := make(map[string]any, len(r.s.plan.Outputs))
	var errs []string
	for _, o := range r.s.plan.Outputs {
		tpl, err := expr.Parse(o.Value)
		if err == nil {
			var v any
			if v, err = tpl.Eval(env); err == nil {
				out[o.Name] = v
				continue
			}
		}
		errs = append(errs, fmt.Sprintf("output %q: %v", o.Name, err))
	}
	return out, errs
}

// end settles the run: final status, outputs, visibility, the RunFinished
// notification, and the workflow's return value. fatal is an error that
// stopped the run before scheduling (bad plan or inputs). Everything here
// runs on a disconnected context so it also happens after a cancel.
func (r *runner) end(ctx workflow.Context, fatal error, errType string) (*Result, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	now := workflow.Now(dctx)
	s := r.s
	switch {
	case fatal != nil:
		s.err = fatal.Error()
		r.setRunStatus(dctx, RunFailed)
	case r.canceled:
		s.err = "canceled"
		r.setRunStatus(dctx, RunCanceled)
	default:
		outputs, outErrs := r.evalOutputs(now)
		s.outputs = outputs
		if len(s.failedSteps()) > 0 || len(outErrs) > 0 {
			s.err = s.failureMessage(outErrs)
			r.setRunStatus(dctx, RunFailed)
		} else {
			r.setRunStatus(dctx, RunSucceeded)
		}
	}
	s.finishedAt = &now
	res := &Result{Status: s.status, Outputs: s.outputs, Error: s.err}

	ev := activities.RunEvent{
		AgentID: s.agentID, RunID: s.runID, Spec: s.plan.Name, Version: s.plan.Version,
		Status: s.status, Error: s.err, DurationMS: now.Sub(s.startedAt).Milliseconds(),
		Outputs: s.outputs, Webhooks: s.plan.Notify,
	}
	deliver := true
	if r.runEndedLocal {
		// Metrics in a local activity; an activity task only to deliver.
		var workerWebhooks bool
		lctx := workflow.WithLocalActivityOptions(dctx, runEndedOptions)
		if err := workflow.ExecuteLocalActivity(lctx, acts.RunEnded, ev).Get(lctx, &workerWebhooks); err != nil {
			r.logger.Warn("run end metrics failed", "error", err)
		}
		ev.MetricsRecorded = true
		deliver = len(ev.Webhooks) > 0 || workerWebhooks
	}
	if deliver {
		// Metrics and webhooks are best effort; the run's outcome stands.
		opts := runFinishedOptions
		opts.Summary = "run finished · " + s.status
		actx := workflow.WithActivityOptions(dctx, opts)
		if err := workflow.ExecuteActivity(actx, acts.RunFinished, ev).Get(actx, nil); err != nil {
			r.logger.Warn("run finished notification failed", "error", err)
		}
	}
	r.logger.Info("run ended", "run_status", s.status, "error", s.err)

	switch s.status {
	case RunSucceeded:
		return res, nil
	case RunCanceled:
		return nil, temporal.NewCanceledError(res)
	default:
		return nil, failure.New(errType, s.err, res)
	}
}
