package noophost

import (
	"errors"
	"strings"
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

func TestJournalDuplicates(t *testing.T) {
	ctx := t.Context()
	res := exechost.ResourceLimits{Runtime: time.Minute}
	// Two processes' journals: "b" ran in both (a re-run after a crash
	// that reused the attempt's identity), "c" twice in one.
	var j1, j2 strings.Builder
	h1, h2 := New(), New()
	h1.Journal, h2.Journal = &j1, &j2
	for _, run := range []struct {
		h  *Host
		id exechost.ExecutionID
	}{{h1, "a"}, {h1, "b"}, {h2, "b"}, {h2, "c"}, {h2, "c"}, {h2, "d"}} {
		_, err := run.h.Provision(ctx, exechost.ProvisionRequest{ExecutionID: run.id, Resources: res})
		require.NoError(t, err)
		_, err = run.h.Exec(ctx, run.id, exechost.ExecRequest{})
		require.NoError(t, err)
	}
	require.Equal(t, "a\nb\n", j1.String())
	dup, lines, err := Duplicates(strings.NewReader(j1.String()), strings.NewReader(j2.String()+"\n"))
	require.NoError(t, err)
	require.Equal(t, 6, lines)
	require.Equal(t, map[exechost.ExecutionID]int{"b": 2, "c": 2}, dup)

	// No duplicates: an empty map, not nil confusion.
	dup, lines, err = Duplicates(strings.NewReader("x\ny\n"))
	require.NoError(t, err)
	require.Equal(t, 2, lines)
	require.Empty(t, dup)

	// A journal that cannot be written fails the exec instead of
	// silently losing the count.
	h3 := New()
	h3.Journal = failingWriter{}
	_, err = h3.Provision(ctx, exechost.ProvisionRequest{ExecutionID: "e", Resources: res})
	require.NoError(t, err)
	_, err = h3.Exec(ctx, "e", exechost.ExecRequest{})
	require.ErrorContains(t, err, "journal")
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
