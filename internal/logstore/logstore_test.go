package logstore

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDirWriteReadTail(t *testing.T) {
	d := NewDir(t.TempDir())
	k := Key{AgentID: "news-1", RunID: "r1", StepID: "fetch", Attempt: 1}

	_, err := d.Read(t.Context(), k, 0)
	require.ErrorIs(t, err, ErrNotFound)

	require.NoError(t, d.Write(t.Context(), k, []byte("first\n")))
	require.NoError(t, d.Write(t.Context(), k, []byte("hello world\n"))) // replaces
	got, err := d.Read(t.Context(), k, 0)
	require.NoError(t, err)
	require.Equal(t, "hello world\n", string(got))

	got, err = d.Read(t.Context(), k, 6)
	require.NoError(t, err)
	require.Equal(t, "world\n", string(got))

	got, err = d.Read(t.Context(), k, 1000)
	require.NoError(t, err)
	require.Equal(t, "hello world\n", string(got))

	require.FileExists(t, filepath.Join(d.Root, "news-1", "r1", "fetch", "1.log"))
	require.Equal(t, filepath.Join(d.Root, "news-1", "r1", "fetch", "1.log"), Path(d.Root, k))
}

func TestDirRejectsBadKeys(t *testing.T) {
	d := NewDir(t.TempDir())
	for _, k := range []Key{
		{RunID: "r", StepID: "s", Attempt: 1},
		{AgentID: "a", StepID: "s", Attempt: 1},
		{AgentID: "a", RunID: "r", Attempt: 1},
		{AgentID: "a", RunID: "r", StepID: "s"},
	} {
		require.Error(t, d.Write(t.Context(), k, nil), k.String())
	}
}

func TestEscapeKeepsHostileIDsInside(t *testing.T) {
	root := t.TempDir()
	d := NewDir(filepath.Join(root, "logs"))
	hostile := []string{"..", ".", "../../etc", "a/b", "%", "%2E", ".hidden", "ok.name", "with space"}
	for i, id := range hostile {
		k := Key{AgentID: id, RunID: id, StepID: "s", Attempt: int32(i + 1)}
		require.NoError(t, d.Write(t.Context(), k, []byte(id)))
		p := Path(d.Root, k)
		rel, err := filepath.Rel(d.Root, p)
		require.NoError(t, err)
		require.True(t, filepath.IsLocal(rel), "path %s escapes", p)

		entries, err := d.List(t.Context(), id)
		require.NoError(t, err)
		require.Len(t, entries, 1, id)
		require.Equal(t, k, entries[0].Key)
	}
	// Nothing was written outside the root.
	top, err := os.ReadDir(root)
	require.NoError(t, err)
	require.Len(t, top, 1)
}

func TestListAndFind(t *testing.T) {
	d := NewDir(t.TempDir())
	ctx := t.Context()
	_, err := d.List(ctx, "nobody")
	require.NoError(t, err)

	write := func(run, step string, attempt int32, mtime time.Time) {
		k := Key{AgentID: "ag", RunID: run, StepID: step, Attempt: attempt}
		require.NoError(t, d.Write(ctx, k, []byte("x")))
		require.NoError(t, os.Chtimes(Path(d.Root, k), mtime, mtime))
	}
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	write("old", "a", 1, base)
	write("old", "a", 2, base.Add(time.Second))
	write("old", "b", 1, base.Add(2*time.Second))
	write("new", "a", 2, base.Add(4*time.Second))
	write("new", "a", 1, base.Add(3*time.Second))

	entries, err := d.List(ctx, "ag")
	require.NoError(t, err)
	require.Len(t, entries, 5)

	keys := func(es []Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Key.String())
		}
		return out
	}
	tests := []struct {
		name    string
		runID   string
		step    string
		attempt int32
		want    []string
	}{
		{name: "latest run all attempts", step: "a", want: []string{"ag/new/a/1", "ag/new/a/2"}},
		{name: "explicit run", runID: "old", step: "a", want: []string{"ag/old/a/1", "ag/old/a/2"}},
		{name: "one attempt", step: "a", attempt: 2, want: []string{"ag/new/a/2"}},
		{name: "step only in old run", step: "b", want: []string{"ag/old/b/1"}},
		{name: "unknown step", step: "zz", want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, keys(Find(entries, tc.runID, tc.step, tc.attempt)))
		})
	}
}
