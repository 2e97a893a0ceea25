//go:build integration

package attemptrec

import (
	"bytes"
	"io"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/testenv"
)

// On a real S3 server (MinIO): write once (IfAbsent), read back verified;
// an object edited behind the store's back by someone with write access to
// the bucket is rejected; a stopped server is ErrUnavailable.
func TestS3Store(t *testing.T) {
	m := testenv.MinIO(t)
	objs, err := objstore.Open(t.Context(), m.StoreURL("af/results"), m.Getenv)
	require.NoError(t, err)
	roundTrip(t, objs)

	// A bucket writer edits attempt 1's output.
	ctx := t.Context()
	c := m.Client(t)
	key := "af/results/" + Key("agent/1", "run-1", "fetch", 1)
	obj, err := c.GetObject(ctx, m.Bucket, key, minio.GetObjectOptions{})
	require.NoError(t, err)
	orig, err := io.ReadAll(obj)
	require.NoError(t, err)
	edited := bytes.Replace(orig, []byte(`{"ok":true}`), []byte(`{"ok":1337}`), 1)
	require.NotEqual(t, orig, edited)
	_, err = c.PutObject(ctx, m.Bucket, key, bytes.NewReader(edited), int64(len(edited)), minio.PutObjectOptions{})
	require.NoError(t, err)

	s, err := New(objs, keyring(t, "k1"), 0)
	require.NoError(t, err)
	entries, err := s.List(ctx, "agent/1", "run-1", "fetch", 2)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	require.ErrorIs(t, entries[0].Err, ErrInvalidRecord)
	require.Nil(t, entries[0].Record)
	require.NoError(t, entries[1].Err)

	m.Stop()
	require.ErrorIs(t, s.Put(ctx, record("fetch", 3)), objstore.ErrUnavailable)
	_, err = s.List(ctx, "agent/1", "run-1", "fetch", 3)
	require.ErrorIs(t, err, objstore.ErrUnavailable)
}
