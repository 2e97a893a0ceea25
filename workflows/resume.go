package workflows

import (
	"fmt"

	"github.com/agentflow/agentflow/internal/spec"
)

// ResumeCarry computes Input.Carry for `agentctl resume` (SPEC §5) from the
// previous run's inspect document:
//
//   - with fromStep: fromStep and every step downstream of it re-run; every
//     other step with a result is carried (status, output, checkpoint),
//     failures included; canceled or unfinished steps have no result and
//     re-run in both modes;
//   - without fromStep: failed and canceled steps, steps skipped as
//     upstream_failed, steps that never finished, and everything downstream
//     of them re-run; the rest is carried.
//
// "Downstream" follows DependsOn, which includes implicit dependencies, so a
// step whose expressions read a re-run step re-runs too. Steps of the plan
// that the previous run does not know (the spec changed) re-run. An unknown
// fromStep is an error.
func ResumeCarry(plan *spec.Plan, prev *Status, fromStep string) (map[string]StepRecord, error) {
	if prev == nil {
		return nil, fmt.Errorf("resume: no previous run status")
	}
	prevByID := make(map[string]StepRecord, len(prev.StepHistory))
	for _, rec := range prev.StepHistory {
		prevByID[rec.ID] = rec
	}
	rerun := make(map[string]bool, len(plan.Steps))
	if fromStep != "" {
		if _, ok := plan.Step(fromStep); !ok {
			return nil, fmt.Errorf("resume: unknown step %q", fromStep)
		}
		rerun[fromStep] = true
	}
	for _, st := range plan.Steps {
		rec, ok := prevByID[st.ID]
		// A step without a result (canceled, never finished, new in the
		// spec) has nothing to carry, whatever the mode.
		if !ok || rec.Status == StepCanceled || !isTerminal(rec.Status) ||
			(fromStep == "" && needsRerun(rec)) {
			rerun[st.ID] = true
		}
	}
	// Propagate downstream until a fixpoint; plans are small, and this does
	// not assume Steps are topologically ordered.
	for changed := true; changed; {
		changed = false
		for _, st := range plan.Steps {
			if rerun[st.ID] {
				continue
			}
			for _, dep := range st.DependsOn {
				if rerun[dep] {
					rerun[st.ID] = true
					changed = true
					break
				}
			}
		}
	}
	carry := make(map[string]StepRecord)
	for _, st := range plan.Steps {
		rec, ok := prevByID[st.ID]
		if rerun[st.ID] || !ok || !isTerminal(rec.Status) {
			continue
		}
		rec.Carried = true
		carry[st.ID] = rec
	}
	return carry, nil
}

func needsRerun(rec StepRecord) bool {
	switch rec.Status {
	case StepFailed, StepCanceled:
		return true
	case StepSkipped:
		return rec.Reason == ReasonUpstreamFailed
	}
	return !isTerminal(rec.Status)
}
