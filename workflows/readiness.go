package workflows

import (
	"fmt"
	"time"

	"github.com/agentflow/agentflow/internal/expr"
)

// DAG readiness (SPEC §5): what the scheduler does with a pending step.

// action is what the scheduler does with a pending step on one pass.
type action int

const (
	actWait  action = iota // some dependency is not terminal yet
	actStart               // run it (tool) or wait for a decision (approval)
	actSkip                // skipped, with a reason
	actFail                // failed without running (its `if` did not evaluate)
)

type decision struct {
	act    action
	reason string
	err    string
}

// decide applies SPEC §5 readiness to one pending step:
//   - ready only when every dependency (explicit and implicit) is terminal;
//   - a step with `if` evaluates it: false → skipped (condition_false),
//     evaluation error → failed; the `if` sees upstream failures itself
//     (the seed's escalate_to_human runs when validate_billing failed);
//   - a step without `if` is skipped (upstream_failed) when a dependency
//     failed without continue_on_error, was canceled, or was itself skipped
//     as upstream_failed. A dependency skipped by its own false `if` does
//     NOT propagate (as in Argo and Tekton): the dependent runs and sees the
//     skipped step's output as null.
func (s *runState) decide(st *stepState, now time.Time) decision {
	for _, dep := range st.plan.DependsOn {
		if !isTerminal(s.byID[dep].rec.Status) {
			return decision{act: actWait}
		}
	}
	if st.plan.If != "" {
		tpl, err := expr.Parse(st.plan.If)
		if err != nil {
			return decision{act: actFail, err: fmt.Sprintf("if: %v", err)}
		}
		ok, err := tpl.EvalBool(s.exprEnv(now))
		if err != nil {
			return decision{act: actFail, err: fmt.Sprintf("if: %v", err)}
		}
		if !ok {
			return decision{act: actSkip, reason: ReasonConditionFalse}
		}
		return decision{act: actStart}
	}
	for _, dep := range st.plan.DependsOn {
		if s.upstreamBroken(s.byID[dep]) {
			return decision{act: actSkip, reason: ReasonUpstreamFailed}
		}
	}
	return decision{act: actStart}
}

func (s *runState) upstreamBroken(dep *stepState) bool {
	switch dep.rec.Status {
	case StepFailed:
		return !dep.plan.ContinueOnError
	case StepCanceled:
		return true
	case StepSkipped:
		return dep.rec.Reason == ReasonUpstreamFailed
	}
	return false
}
