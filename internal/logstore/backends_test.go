package logstore

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/objstore"
)

// backendCases are the log store's behaviours that depend on the object
// store underneath (listing, IfAbsent, deletes, modification times): run on
// every implementation, Mem and Dir here, S3 (MinIO) in the integration
// tests.
func backendCases(t *testing.T, open func(t *testing.T) objstore.Store) {
	t.Run("WriteFollowRead", func(t *testing.T) {
		s := New(open(t), Options{FlushInterval: 10 * time.Millisecond})
		ctx := t.Context()
		w, err := s.Open(ctx, key1)
		require.NoError(t, err)
		var out syncBuffer
		done := make(chan error, 1)
		go func() { done <- s.Follow(ctx, key1, &out, FollowOptions{Poll: 10 * time.Millisecond}) }()
		_, _ = io.WriteString(w, "running line\n")
		require.Eventually(t, func() bool { return out.String() == "running line\n" }, time.Minute, 10*time.Millisecond)
		entries, err := s.List(ctx, key1.AgentID)
		require.NoError(t, err)
		require.Len(t, entries, 1)
		require.False(t, entries[0].Finished)
		_, _ = io.WriteString(w, strings.Repeat("x", 3*DefaultChunkBytes)+"\n") // several chunks at once
		require.NoError(t, w.Close(ctx, Trailer{Text: []byte("end line\n"), Outcome: "success"}))
		require.NoError(t, <-done)
		want := "running line\n" + strings.Repeat("x", 3*DefaultChunkBytes) + "\nend line\n"
		require.Equal(t, want, out.String())
		got, err := s.Read(ctx, key1, 0)
		require.NoError(t, err)
		require.Equal(t, want, string(got))
		got, err = s.Read(ctx, key1, 9)
		require.NoError(t, err)
		require.Equal(t, "end line\n", string(got))
		entries, err = s.List(ctx, key1.AgentID)
		require.NoError(t, err)
		require.Len(t, entries, 1)
		require.True(t, entries[0].Finished)
		require.Equal(t, int64(len(want)), entries[0].Size)
	})
	t.Run("RedeliveryLatestOpenWins", func(t *testing.T) {
		s := New(open(t), Options{FlushInterval: time.Hour})
		ctx := t.Context()
		old, err := s.Open(ctx, key1)
		require.NoError(t, err)
		_, _ = io.WriteString(old, "old\n")
		require.NoError(t, old.Flush(ctx))
		cur, err := s.Open(ctx, key1)
		require.NoError(t, err)
		_, _ = io.WriteString(old, "old again\n")
		require.NoError(t, old.Flush(ctx))
		_, _ = io.WriteString(cur, "new\n")
		require.ErrorIs(t, old.Close(ctx, Trailer{}), ErrSuperseded)
		require.NoError(t, cur.Close(ctx, Trailer{}))
		got, err := s.Read(ctx, key1, 0)
		require.NoError(t, err)
		require.Equal(t, "[agentflow: 1 chunk(s) of another delivery of this attempt ignored]\nnew\n", string(got))
	})
	t.Run("LegacyWholeLog", func(t *testing.T) {
		st := open(t)
		put(t, st, key1.legacyKey(), "written whole by an earlier version\n")
		s := New(st, slowFlush)
		got, err := s.Read(t.Context(), key1, 0)
		require.NoError(t, err)
		require.Equal(t, "written whole by an earlier version\n", string(got))
		entries, err := s.List(t.Context(), key1.AgentID)
		require.NoError(t, err)
		require.Equal(t, []Key{key1}, []Key{entries[0].Key})
		require.True(t, entries[0].Finished)
	})
}

func TestBackends(t *testing.T) {
	t.Run("Mem", func(t *testing.T) { backendCases(t, func(*testing.T) objstore.Store { return objstore.NewMem() }) })
	t.Run("Dir", func(t *testing.T) {
		backendCases(t, func(t *testing.T) objstore.Store {
			d, err := objstore.NewDir(t.TempDir())
			require.NoError(t, err)
			t.Cleanup(func() { _ = d.Close() })
			return d
		})
	})
}

// TestNewDirReadsTheOldLayout: a log directory an earlier version wrote
// (<dir>/<agent>/<run>/<step>/<attempt>.log) stays readable.
func TestNewDirReadsTheOldLayout(t *testing.T) {
	dir := t.TempDir()
	old, err := objstore.NewDir(dir)
	require.NoError(t, err)
	put(t, old, "news-1/r1/fetch/2.log", "old attempt 2\n")
	require.NoError(t, old.Close())
	s, closeDir, err := NewDir(dir, Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, closeDir()) }()
	k := key1
	k.Attempt = 2
	got, err := s.Read(t.Context(), k, 0)
	require.NoError(t, err)
	require.Equal(t, "old attempt 2\n", string(got))
}
