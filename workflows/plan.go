package workflows

import (
	"fmt"

	"github.com/agentflow/agentflow/internal/spec"
)

// PlanError is a Plan the workflow cannot interpret (hand-built or corrupted:
// the spec compiler never produces one).
type PlanError struct{ Msg string }

func (e *PlanError) Error() string { return "invalid plan: " + e.Msg }

// checkPlan verifies the structural invariants the scheduler relies on:
// a supported schema version, unique step IDs, known dependencies, no
// cycles, each step either a tool/image step or an approval, and every
// tool step with its per-attempt timeout.
func checkPlan(p *spec.Plan) error {
	if p.SchemaVersion != spec.PlanSchemaVersion {
		return &PlanError{Msg: fmt.Sprintf("schema version %d is not supported by this worker (supports %d)", p.SchemaVersion, spec.PlanSchemaVersion)}
	}
	if len(p.Steps) == 0 {
		return &PlanError{Msg: "no steps"}
	}
	index := make(map[string]int, len(p.Steps))
	for i, st := range p.Steps {
		if st.ID == "" {
			return &PlanError{Msg: fmt.Sprintf("step %d has no id", i)}
		}
		if _, dup := index[st.ID]; dup {
			return &PlanError{Msg: fmt.Sprintf("duplicate step %q", st.ID)}
		}
		index[st.ID] = i
		isTool := st.Tool != "" || st.Image != ""
		if isTool == (st.Approval != nil) {
			return &PlanError{Msg: fmt.Sprintf("step %q must have exactly one of tool/image or approval", st.ID)}
		}
		if isTool && st.Timeout <= 0 {
			// The compiled Plan is authoritative for the time budget: the
			// spec compiler gives every tool step its timeout, so a step
			// without one was built by hand; guessing one here would be a
			// second place the default lives.
			return &PlanError{Msg: fmt.Sprintf("tool step %q has no timeout", st.ID)}
		}
	}
	for _, st := range p.Steps {
		for _, dep := range st.DependsOn {
			if _, ok := index[dep]; !ok {
				return &PlanError{Msg: fmt.Sprintf("step %q depends on unknown step %q", st.ID, dep)}
			}
			if dep == st.ID {
				return &PlanError{Msg: fmt.Sprintf("step %q depends on itself", st.ID)}
			}
		}
	}
	// Kahn's algorithm in spec order: anything left over is on a cycle.
	indeg := make([]int, len(p.Steps))
	for i, st := range p.Steps {
		indeg[i] = len(st.DependsOn)
	}
	dependents := make([][]int, len(p.Steps))
	for i, st := range p.Steps {
		for _, dep := range st.DependsOn {
			dependents[index[dep]] = append(dependents[index[dep]], i)
		}
	}
	var queue []int
	for i := range p.Steps {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	seen := 0
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		seen++
		for _, j := range dependents[i] {
			indeg[j]--
			if indeg[j] == 0 {
				queue = append(queue, j)
			}
		}
	}
	if seen != len(p.Steps) {
		for i, st := range p.Steps {
			if indeg[i] > 0 {
				return &PlanError{Msg: fmt.Sprintf("dependency cycle through step %q", st.ID)}
			}
		}
	}
	return nil
}
