package attemptrec

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/objstore"
)

// On the local-directory store (the default results store): write once,
// read back verified.
func TestDirStore(t *testing.T) {
	d, err := objstore.NewDir(t.TempDir())
	require.NoError(t, err)
	roundTrip(t, d)
}

// roundTrip is the behaviour every backing store must give the records.
func roundTrip(t *testing.T, objs objstore.Store) {
	t.Helper()
	ctx := t.Context()
	s, err := New(objs, keyring(t, "k1"), 0)
	require.NoError(t, err)
	require.NoError(t, s.Put(ctx, record("fetch", 1)))
	require.ErrorIs(t, s.Put(ctx, record("fetch", 1)), objstore.ErrExists)
	require.NoError(t, s.Put(ctx, record("fetch", 2)))
	entries, err := s.List(ctx, "agent/1", "run-1", "fetch", 2)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	for _, e := range entries {
		require.NoError(t, e.Err)
		require.Equal(t, e.Attempt, e.Record.Attempt)
	}
}
