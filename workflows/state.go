package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/expr"
	"github.com/agentflow/agentflow/internal/spec"
)

// runState is the whole mutable state of one run. Workflow coroutines are
// cooperatively scheduled, so it needs no locking; the status query reads
// it between workflow tasks.
type runState struct {
	plan   *spec.Plan
	inputs map[string]any

	agentID     string
	runID       string
	resumedFrom string

	status     string
	err        string
	outputs    map[string]any
	startedAt  time.Time
	finishedAt *time.Time

	steps []*stepState          // plan order
	byID  map[string]*stepState // lookup only, never iterated
	// history is the order in which steps left pending: the order of
	// step_history in the inspect document (the seed's `step_history[-1]`
	// is the most recent step).
	history []string
	// decisions buffers approval signals by step until the step waits.
	decisions map[string]*ApprovalDecision
}

type stepState struct {
	plan *spec.PlanStep
	rec  StepRecord
}

func newRunState(plan *spec.Plan) *runState {
	s := &runState{
		plan:      plan,
		status:    RunPending,
		byID:      make(map[string]*stepState, len(plan.Steps)),
		decisions: map[string]*ApprovalDecision{},
	}
	for i := range plan.Steps {
		ps := &plan.Steps[i]
		st := &stepState{plan: ps, rec: StepRecord{
			ID: ps.ID, Status: StepPending, Tool: ps.Tool, Image: ps.Image,
		}}
		for _, r := range ps.Egress {
			st.rec.Egress = append(st.rec.Egress, r.String())
		}
		s.steps = append(s.steps, st)
		s.byID[ps.ID] = st
	}
	return s
}

func isTerminal(status string) bool {
	switch status {
	case StepSuccess, StepFailed, StepSkipped, StepCanceled:
		return true
	}
	return false
}

// leavePending records the moment a step first leaves pending.
func (s *runState) leavePending(st *stepState) {
	if st.rec.Status == StepPending {
		s.history = append(s.history, st.rec.ID)
	}
}

// finish moves a step to a terminal status.
func (s *runState) finish(st *stepState, status, reason, errMsg string, now time.Time) {
	s.leavePending(st)
	st.rec.Status = status
	st.rec.Reason = reason
	st.rec.Error = errMsg
	t := now
	st.rec.FinishedAt = &t
	if st.rec.StartedAt != nil {
		st.rec.DurationMS = now.Sub(*st.rec.StartedAt).Milliseconds()
	}
}

func (s *runState) start(st *stepState, status string, now time.Time) {
	s.leavePending(st)
	st.rec.Status = status
	t := now
	st.rec.StartedAt = &t
}

func (s *runState) allTerminal() bool {
	for _, st := range s.steps {
		if !isTerminal(st.rec.Status) {
			return false
		}
	}
	return true
}

// exprEnv is the evaluation context of expressions: run inputs and every
// step's status and output (a step's references are its dependencies, so
// they are terminal whenever the step is evaluated).
func (s *runState) exprEnv(now time.Time) *expr.Env {
	env := &expr.Env{Inputs: s.inputs, Steps: make(map[string]expr.StepView, len(s.steps)), Now: now}
	for _, st := range s.steps {
		env.Steps[st.rec.ID] = expr.StepView{Status: st.rec.Status, Output: st.rec.Output}
	}
	return env
}

// failedSteps are the steps that make the run fail, in history order: a
// step that failed without continue_on_error, or one that ended canceled
// in a run that was not canceled (it has no result either).
func (s *runState) failedSteps() []*stepState {
	var out []*stepState
	for _, id := range s.history {
		st := s.byID[id]
		if (st.rec.Status == StepFailed || st.rec.Status == StepCanceled) && !st.plan.ContinueOnError {
			out = append(out, st)
		}
	}
	return out
}

func (s *runState) failureMessage(outputErrs []string) string {
	var parts []string
	failed := s.failedSteps()
	if len(failed) > 0 {
		first := failed[0]
		msg := fmt.Sprintf("step %q %s", first.rec.ID, first.rec.Status)
		if first.rec.Error != "" {
			msg += ": " + first.rec.Error
		}
		if len(failed) > 1 {
			ids := make([]string, 0, len(failed)-1)
			for _, st := range failed[1:] {
				ids = append(ids, st.rec.ID)
			}
			msg += fmt.Sprintf(" (also failed: %s)", strings.Join(ids, ", "))
		}
		parts = append(parts, msg)
	}
	parts = append(parts, outputErrs...)
	return strings.Join(parts, "; ")
}

// doc builds the inspect document (SPEC §6). It copies what it returns so
// a query never aliases state the workflow keeps mutating.
func (s *runState) doc() *Status {
	d := &Status{
		ID:          s.agentID,
		RunID:       s.runID,
		Name:        s.plan.Name,
		Version:     s.plan.Version,
		Status:      s.status,
		Error:       s.err,
		ResumedFrom: s.resumedFrom,
		StepHistory: make([]StepRecord, 0, len(s.history)),
		Context:     map[string]any{"inputs": s.inputs},
		Outputs:     s.outputs,
		FinishedAt:  s.finishedAt,
	}
	if !s.startedAt.IsZero() {
		t := s.startedAt
		d.StartedAt = &t
	}
	done := 0
	for _, st := range s.steps {
		if isTerminal(st.rec.Status) {
			done++
		}
		if d.CurrentStep == "" && (st.rec.Status == StepRunning || st.rec.Status == StepWaitingApproval) {
			d.CurrentStep = st.rec.ID
		}
		if st.rec.Output != nil {
			d.Context[st.rec.ID] = map[string]any{"output": st.rec.Output}
		}
	}
	for _, id := range s.history {
		rec := s.byID[id].rec
		rec.AttemptHistory = slices.Clone(rec.AttemptHistory)
		d.StepHistory = append(d.StepHistory, rec)
	}
	d.Progress = fmt.Sprintf("%d/%d", done, len(s.steps))
	return d
}
