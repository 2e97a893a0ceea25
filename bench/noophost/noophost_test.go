package noophost

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
)

func TestCountsToolRunsPerExecution(t *testing.T) {
	h := New()
	ctx := t.Context()
	res := exechost.ResourceLimits{Runtime: time.Minute}
	for _, id := range []exechost.ExecutionID{"a", "b"} {
		_, err := h.Provision(ctx, exechost.ProvisionRequest{ExecutionID: id, Resources: res})
		require.NoError(t, err)
		out, err := h.Exec(ctx, id, exechost.ExecRequest{Stdin: []byte(`{}`)})
		require.NoError(t, err)
		require.Equal(t, 0, out.ExitCode)
		require.JSONEq(t, `{"ok":true,"bytes_in":2}`, string(out.Stdout))
	}
	_, err := h.Exec(ctx, "b", exechost.ExecRequest{}) // the same attempt's tool again
	require.NoError(t, err)
	cp, err := h.Checkpoint(ctx, "a", exechost.CheckpointRequest{})
	require.NoError(t, err)
	m, err := h.Stat(ctx, cp.CheckpointID)
	require.NoError(t, err)
	require.Equal(t, exechost.ExecutionID("a"), m.ExecutionID)
	require.NoError(t, h.Terminate(ctx, "a"))
	_, err = h.Exec(ctx, "a", exechost.ExecRequest{})
	require.ErrorIs(t, err, exechost.ErrTerminated)
	require.Equal(t, Stats{Execs: 3, Executions: 2, Duplicated: 1, Live: 1}, h.Stats())
}

func TestFailRate(t *testing.T) {
	h := New()
	h.FailRate = 1
	_, err := h.Provision(t.Context(), exechost.ProvisionRequest{ExecutionID: "x", Resources: exechost.ResourceLimits{Runtime: time.Minute}})
	require.NoError(t, err)
	out, err := h.Exec(t.Context(), "x", exechost.ExecRequest{})
	require.NoError(t, err)
	require.Equal(t, 1, out.ExitCode)
	require.Contains(t, string(out.Stdout), `"error"`)
}
