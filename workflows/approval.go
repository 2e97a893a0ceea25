package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"
)

// onApproval files an approval signal. The first decision for a step wins;
// decisions for steps that have not started waiting yet are kept until they
// do; signals for unknown, non-approval or already finished steps are
// logged and dropped (a signal cannot be refused, so this is the only
// sensible handling).
func (r *runner) onApproval(d ApprovalDecision) {
	st, ok := r.s.byID[d.Step]
	switch {
	case !ok:
		r.logger.Warn("approval signal for unknown step ignored", "step_id", d.Step)
	case st.plan.Approval == nil:
		r.logger.Warn("approval signal for a step that is not an approval ignored", "step_id", d.Step)
	case isTerminal(st.rec.Status):
		r.logger.Warn("approval signal for a finished step ignored", "step_id", d.Step, "step_status", st.rec.Status)
	case r.s.decisions[d.Step] != nil:
		r.logger.Warn("duplicate approval signal ignored", "step_id", d.Step)
	default:
		dec := d
		r.s.decisions[d.Step] = &dec
		r.logger.Info("approval decision received", "step_id", d.Step, "approve", d.Approve, "by", d.By)
	}
}

// runApproval waits for the step's decision or its timeout (0 = wait
// forever). Approve → success with output {approved, by, comment}; reject →
// failed with the comment in the error (the same output is kept so a
// downstream `if` can look at it); timeout → failed; workflow cancel →
// canceled.
func (r *runner) runApproval(ctx workflow.Context, st *stepState) {
	id := st.rec.ID
	timeout := st.plan.Approval.Timeout
	cond := func() bool { return r.s.decisions[id] != nil }
	var ok bool
	var err error
	if timeout > 0 {
		ok, err = workflow.AwaitWithOptions(ctx, workflow.AwaitOptions{
			Timeout:      timeout,
			TimerOptions: workflow.TimerOptions{Summary: "approval timeout · " + id},
		}, cond)
	} else {
		err = workflow.Await(ctx, cond)
		ok = err == nil
	}
	now := workflow.Now(ctx)
	switch {
	case err != nil:
		r.s.finish(st, StepCanceled, "", "", now)
	case !ok:
		r.s.finish(st, StepFailed, "", fmt.Sprintf("approval timed out after %s", timeout), now)
	default:
		d := r.s.decisions[id]
		st.rec.ApprovedBy = d.By
		st.rec.Comment = d.Comment
		st.rec.Output = map[string]any{"approved": d.Approve, "by": d.By, "comment": d.Comment}
		if d.Approve {
			r.s.finish(st, StepSuccess, "", "", now)
		} else {
			msg := "rejected"
			if d.By != "" {
				msg += " by " + d.By
			}
			if d.Comment != "" {
				msg += ": " + d.Comment
			}
			r.s.finish(st, StepFailed, "", msg, now)
		}
	}
	r.logger.Info("approval step finished", "step_id", id, "step_status", st.rec.Status)
}
