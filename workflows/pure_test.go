package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/spec"
)

func TestResolveInputs(t *testing.T) {
	decls := []spec.InputDecl{
		{Name: "email_id", Type: spec.TypeString, Required: true},
		{Name: "limit", Type: spec.TypeNumber, Default: 10},
		{Name: "dry", Type: spec.TypeBoolean},
		{Name: "tags", Type: spec.TypeArray},
		{Name: "meta", Type: spec.TypeObject, Default: map[string]any{"a": "b"}},
	}
	tests := []struct {
		name    string
		given   map[string]any
		want    map[string]any
		wantErr []string
	}{
		{
			name:  "defaults and nulls applied",
			given: map[string]any{"email_id": "e1"},
			want:  map[string]any{"email_id": "e1", "limit": 10, "dry": nil, "tags": nil, "meta": map[string]any{"a": "b"}},
		},
		{
			name:  "given values normalised",
			given: map[string]any{"email_id": "e1", "limit": 3, "dry": true, "tags": []any{"x"}, "meta": map[string]any{}},
			want:  map[string]any{"email_id": "e1", "limit": float64(3), "dry": true, "tags": []any{"x"}, "meta": map[string]any{}},
		},
		{
			name:    "missing required",
			given:   nil,
			wantErr: []string{`input "email_id" is required`},
		},
		{
			name:  "every problem reported in a stable order",
			given: map[string]any{"email_id": 5, "dry": "yes", "zeta": 1, "alpha": 2},
			wantErr: []string{
				`input "email_id" must be a string, got number`,
				`input "dry" must be a boolean, got string`,
				`input "alpha" is not declared by the spec`,
				`input "zeta" is not declared by the spec`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveInputs(&spec.Plan{Inputs: decls}, tc.given)
			if tc.wantErr != nil {
				var ie *InputError
				require.ErrorAs(t, err, &ie)
				require.Equal(t, tc.wantErr, ie.Problems)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestResumeCarrySets(t *testing.T) {
	// fetch → extract → {validate → send, escalate}; lint is independent.
	plan := testPlan(
		tool("fetch"), tool("extract", "fetch"), tool("validate", "extract"),
		tool("send", "validate"), tool("escalate", "validate"), tool("lint"),
	)
	rec := func(id, status, reason string) StepRecord {
		return StepRecord{ID: id, Status: status, Reason: reason, CheckpointID: "cp-" + id, Output: map[string]any{"id": id}}
	}
	failedRun := &Status{StepHistory: []StepRecord{
		rec("fetch", StepSuccess, ""), rec("extract", StepSuccess, ""), rec("validate", StepFailed, ""),
		rec("send", StepSkipped, ReasonUpstreamFailed), rec("escalate", StepSkipped, ReasonConditionFalse),
		rec("lint", StepSuccess, ""),
	}}
	canceledRun := &Status{StepHistory: []StepRecord{
		rec("fetch", StepSuccess, ""), rec("extract", StepCanceled, ""), rec("lint", StepCanceled, ""),
	}}
	tests := []struct {
		name      string
		prev      *Status
		from      string
		wantCarry []string
		wantErr   string
	}{
		{name: "failed run: re-run failed and downstream", prev: failedRun, wantCarry: []string{"extract", "fetch", "lint"}},
		{name: "canceled run: canceled and never-run steps re-run", prev: canceledRun, wantCarry: []string{"fetch"}},
		{name: "from a middle step", prev: failedRun, from: "extract", wantCarry: []string{"fetch", "lint"}},
		{name: "from a leaf carries everything else, failures included", prev: failedRun, from: "lint",
			wantCarry: []string{"escalate", "extract", "fetch", "send", "validate"}},
		{name: "from the root re-runs its whole subtree", prev: failedRun, from: "fetch", wantCarry: []string{"lint"}},
		{name: "from a step of a canceled run: canceled steps have nothing to carry", prev: canceledRun, from: "lint",
			wantCarry: []string{"fetch"}},
		{name: "unknown step", prev: failedRun, from: "nope", wantErr: `unknown step "nope"`},
		{name: "no previous status", prev: nil, wantErr: "no previous run status"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			carry, err := ResumeCarry(&plan, tc.prev, tc.from)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.ElementsMatch(t, tc.wantCarry, sortedKeys(carry))
			for id, r := range carry {
				require.True(t, r.Carried, id)
				require.Equal(t, "cp-"+id, r.CheckpointID)
				require.Equal(t, map[string]any{"id": id}, r.Output)
			}
		})
	}
}

func TestResumeCarryFollowsImplicitDependencies(t *testing.T) {
	plan := testPlan(tool("a"), tool("b"))
	plan.Steps[1].DependsOn = []string{"a"} // implicit only: an expression reads a
	prev := &Status{StepHistory: []StepRecord{{ID: "a", Status: StepSuccess}, {ID: "b", Status: StepSuccess}}}
	carry, err := ResumeCarry(&plan, prev, "a")
	require.NoError(t, err)
	require.Empty(t, carry)
}

func TestCheckPlan(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(p *spec.Plan)
		wantErr string
	}{
		{name: "valid", mutate: func(*spec.Plan) {}},
		{name: "schema version", mutate: func(p *spec.Plan) { p.SchemaVersion = 0 }, wantErr: "schema version 0"},
		{name: "no steps", mutate: func(p *spec.Plan) { p.Steps = nil }, wantErr: "no steps"},
		{name: "duplicate", mutate: func(p *spec.Plan) { p.Steps[1].ID = "a" }, wantErr: `duplicate step "a"`},
		{name: "unknown dep", mutate: func(p *spec.Plan) { p.Steps[1].DependsOn = []string{"x"} }, wantErr: `unknown step "x"`},
		{name: "self dep", mutate: func(p *spec.Plan) { p.Steps[0].DependsOn = []string{"a"} }, wantErr: "depends on itself"},
		{name: "cycle", mutate: func(p *spec.Plan) { p.Steps[0].DependsOn = []string{"c"} }, wantErr: "dependency cycle"},
		{name: "tool and approval", mutate: func(p *spec.Plan) { p.Steps[0].Approval = &spec.Approval{} }, wantErr: "exactly one of"},
		{name: "neither", mutate: func(p *spec.Plan) { p.Steps[0].Tool, p.Steps[0].Image = "", "" }, wantErr: "exactly one of"},
		{name: "tool step without timeout", mutate: func(p *spec.Plan) { p.Steps[1].Timeout = 0 }, wantErr: `tool step "b" has no timeout`},
		{name: "image step with negative timeout", mutate: func(p *spec.Plan) { p.Steps[2].Tool, p.Steps[2].Timeout = "", -1 }, wantErr: `tool step "c" has no timeout`},
		{name: "approval needs no step timeout", mutate: func(p *spec.Plan) {
			p.Steps[2] = approvalStep("c", time.Hour, "b")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := testPlan(tool("a"), tool("b", "a"), tool("c", "b"))
			tc.mutate(&p)
			err := checkPlan(&p)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			var pe *PlanError
			require.ErrorAs(t, err, &pe)
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestWorkspaceLayers(t *testing.T) {
	p := testPlan(
		tool("a"), tool("b"), approvalStep("gate", 0, "a"), tool("skipped"),
		tool("d", "b", "gate", "skipped"),
	)
	// d: explicit b, gate, skipped; plus an implicit dependency on a.
	p.Steps[4].DependsOn = []string{"b", "gate", "skipped", "a"}
	s := newRunState(&p)
	s.byID["a"].rec = StepRecord{ID: "a", Status: StepSuccess, CheckpointID: "cp-a"}
	s.byID["b"].rec = StepRecord{ID: "b", Status: StepSuccess, CheckpointID: "cp-b"}
	s.byID["gate"].rec = StepRecord{ID: "gate", Status: StepSuccess}
	s.byID["skipped"].rec = StepRecord{ID: "skipped", Status: StepSkipped}
	git, layers := s.workspace(&p.Steps[4])
	require.Nil(t, git)
	// b, then gate (transparent: a), then the implicit a again: a wins last.
	require.Equal(t, []string{"cp-b", "cp-a"}, layers)
}
