package registry

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentflow/agentflow/internal/testenv"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

const (
	imgA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	imgB = "example.com/tools/echo@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// step is one scripted interaction with the running registry.
type step struct {
	update string // UpdateRegister or UpdateRemove
	arg    any
	// want: "" success, "reject: <substr>" validator rejection,
	// "fail: <substr>" handler error.
	want string
}

type outcome struct {
	rejected  error
	completed any
	err       error
}

// runScript starts the registry, sends the steps one minute apart, then
// cancels it (unless it continued-as-new first) and returns the env and
// every update's outcome.
func runScript(t *testing.T, st State, probe func(ProbeRequest) (*ProbeResult, error), steps []step) (*testsuite.TestWorkflowEnvironment, []outcome) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := testenv.WorkflowEnv(&s)
	env.RegisterWorkflowWithOptions(RegistryWorkflow, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivity(&Prober{})
	env.OnActivity("ProbeTool", mock.Anything, mock.Anything).Return(
		func(_ context.Context, req ProbeRequest) (*ProbeResult, error) { return probe(req) })

	out := make([]outcome, len(steps))
	for i, s := range steps {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(s.update, "u"+string(rune('a'+i)), &testsuite.TestUpdateCallback{
				OnReject:   func(err error) { out[i].rejected = err },
				OnComplete: func(v any, err error) { out[i].completed, out[i].err = v, err },
			}, s.arg)
		}, time.Duration(i+1)*time.Minute)
	}
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Duration(len(steps)+5)*time.Minute)
	env.ExecuteWorkflow(WorkflowName, st)
	require.True(t, env.IsWorkflowCompleted())

	for i, s := range steps {
		o := out[i]
		switch {
		case s.want == "":
			require.NoError(t, o.rejected, "step %d rejected", i)
			require.NoError(t, o.err, "step %d failed", i)
		case strings.HasPrefix(s.want, "reject: "):
			require.Error(t, o.rejected, "step %d should be rejected", i)
			require.Contains(t, o.rejected.Error(), strings.TrimPrefix(s.want, "reject: "))
		case strings.HasPrefix(s.want, "fail: "):
			require.NoError(t, o.rejected, "step %d rejected", i)
			require.Error(t, o.err, "step %d should fail", i)
			require.Contains(t, o.err.Error(), strings.TrimPrefix(s.want, "fail: "))
		}
	}
	return env, out
}

func okProbe(req ProbeRequest) (*ProbeResult, error) {
	return &ProbeResult{Version: req.Version, Usage: "usage of " + req.Name}, nil
}

func queryTools(t *testing.T, env *testsuite.TestWorkflowEnvironment) []string {
	t.Helper()
	v, err := env.QueryWorkflow(QueryTools)
	require.NoError(t, err)
	var tools []Tool
	require.NoError(t, v.Get(&tools))
	var refs []string
	for _, tl := range tools {
		refs = append(refs, tl.Ref()+"="+tl.Image)
	}
	return refs
}

func TestRegistryWorkflow(t *testing.T) {
	reg := func(name, version, image string) RegisterRequest {
		return RegisterRequest{Name: name, Version: version, Image: image, Description: "d"}
	}
	tests := []struct {
		name   string
		steps  []step
		probe  func(ProbeRequest) (*ProbeResult, error)
		want   []string
		probes int
	}{
		{
			name:   "register and query sorted",
			steps:  []step{{UpdateRegister, reg("zeta", "1.0", imgA), ""}, {UpdateRegister, reg("alpha", "2.0", imgB), ""}, {UpdateRegister, reg("alpha", "1.0", imgA), ""}},
			want:   []string{"alpha:1.0=" + imgA, "alpha:2.0=" + imgB, "zeta:1.0=" + imgA},
			probes: 3,
		},
		{
			name:   "same digest twice is idempotent and probes once",
			steps:  []step{{UpdateRegister, reg("echo", "1.0", imgA), ""}, {UpdateRegister, reg("echo", "1.0", imgA), ""}},
			want:   []string{"echo:1.0=" + imgA},
			probes: 1,
		},
		{
			name:   "same name:version with another digest is refused",
			steps:  []step{{UpdateRegister, reg("echo", "1.0", imgA), ""}, {UpdateRegister, reg("echo", "1.0", imgB), "reject: already registered"}},
			want:   []string{"echo:1.0=" + imgA},
			probes: 1,
		},
		{
			name: "invalid requests never reach the handler",
			steps: []step{
				{UpdateRegister, reg("Bad Name", "1.0", imgA), "reject: tool name"},
				{UpdateRegister, reg("echo", "", imgA), "reject: tool version"},
				{UpdateRegister, reg("echo", "1.0", "agentflow/tool-echo:1.0"), "reject: not digest-pinned"},
			},
			probes: 0,
		},
		{
			name:  "probe version mismatch fails the update and stores nothing",
			steps: []step{{UpdateRegister, reg("echo", "1.0", imgA), "fail: printed"}},
			probe: func(ProbeRequest) (*ProbeResult, error) {
				return nil, temporal.NewNonRetryableApplicationError(`--version printed "0.9"`, ErrTypeVersionMismatch, nil)
			},
			probes: 1,
		},
		{
			name: "remove one version, then the whole tool",
			steps: []step{
				{UpdateRegister, reg("echo", "1.0", imgA), ""},
				{UpdateRegister, reg("echo", "2.0", imgB), ""},
				{UpdateRegister, reg("other", "1.0", imgB), ""},
				{UpdateRemove, RemoveRequest{Name: "echo", Version: "1.0"}, ""},
				{UpdateRemove, RemoveRequest{Name: "echo", Version: "1.0"}, "reject: not registered"},
				{UpdateRemove, RemoveRequest{Name: "other"}, ""},
				{UpdateRemove, RemoveRequest{Name: "nope"}, "reject: not registered"},
			},
			want:   []string{"echo:2.0=" + imgB},
			probes: 3,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			probe := tc.probe
			if probe == nil {
				probe = okProbe
			}
			calls := 0
			counted := func(r ProbeRequest) (*ProbeResult, error) { calls++; return probe(r) }
			env, _ := runScript(t, State{}, counted, tc.steps)
			var canceled *temporal.CanceledError
			require.ErrorAs(t, env.GetWorkflowError(), &canceled)
			require.Equal(t, tc.want, queryTools(t, env))
			require.Equal(t, tc.probes, calls)
		})
	}
}

func TestRegistryStoresProbeUsageAndTime(t *testing.T) {
	env, out := runScript(t, State{}, okProbe, []step{{UpdateRegister, RegisterRequest{Name: "echo", Version: "1.0", Image: imgB, PinnedFrom: "echo:latest"}, ""}})
	v, err := env.QueryWorkflow(QueryTools)
	require.NoError(t, err)
	var tools []Tool
	require.NoError(t, v.Get(&tools))
	require.Len(t, tools, 1)
	require.Equal(t, "usage of echo", tools[0].Usage)
	require.Equal(t, "sha256:"+strings.Repeat("b", 64), tools[0].Digest)
	require.Equal(t, "echo:latest", tools[0].PinnedFrom)
	require.False(t, tools[0].RegisteredAt.IsZero())
	require.NotNil(t, out[0].completed)
}

func TestRegistryContinuesAsNewCarryingState(t *testing.T) {
	prior := map[string]map[string]Tool{"old": {"0.1": {Name: "old", Version: "0.1", Image: imgA, Digest: imgA}}}
	var s testsuite.WorkflowTestSuite
	env := testenv.WorkflowEnv(&s)
	env.RegisterWorkflowWithOptions(RegistryWorkflow, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivity(&Prober{})
	env.OnActivity("ProbeTool", mock.Anything, mock.Anything).Return(func(_ context.Context, req ProbeRequest) (*ProbeResult, error) { return okProbe(req) })
	for i, name := range []string{"a", "b"} {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(UpdateRegister, name, &testsuite.TestUpdateCallback{
				OnReject:   func(err error) { t.Errorf("rejected: %v", err) },
				OnComplete: func(_ any, err error) { require.NoError(t, err) },
			}, RegisterRequest{Name: name, Version: "1.0", Image: imgB})
		}, time.Duration(i+1)*time.Minute)
	}
	env.ExecuteWorkflow(WorkflowName, State{Tools: prior, MaxUpdates: 2})

	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	require.Equal(t, WorkflowName, can.WorkflowType.Name)
	var next State
	require.NoError(t, converterGet(can, &next))
	require.Equal(t, 2, next.MaxUpdates)
	var refs []string
	for _, tl := range Sorted(next.Tools) {
		refs = append(refs, tl.Ref())
	}
	require.Equal(t, []string{"a:1.0", "b:1.0", "old:0.1"}, refs)
}

func converterGet(can *workflow.ContinueAsNewError, v any) error {
	if can.Input == nil || len(can.Input.Payloads) != 1 {
		return errors.New("continue-as-new input: want one payload")
	}
	return testDataConverter.FromPayload(can.Input.Payloads[0], v)
}
