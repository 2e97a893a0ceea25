//go:build integration

package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/objstore/objstoretest"
	"github.com/agentflow/agentflow/internal/testenv"
)

func openS3(t *testing.T, m *testenv.MinIOServer, prefix string) objstore.Store {
	t.Helper()
	s, err := objstore.Open(t.Context(), m.StoreURL(prefix), m.Getenv)
	require.NoError(t, err)
	require.IsType(t, &objstore.S3{}, s)
	return s
}

func TestConformanceS3(t *testing.T) {
	m := testenv.MinIO(t)
	var n atomic.Int64
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		// One bucket, a fresh prefix per subtest: each starts empty.
		return openS3(t, m, fmt.Sprintf("conformance/%d", n.Add(1)))
	})
	// And without a prefix: the bucket root.
	t.Run("NoPrefix", func(t *testing.T) {
		s := openS3(t, m, "")
		require.Equal(t, "s3://"+m.Bucket, s.String())
		_, err := s.Put(t.Context(), "root-object", strings.NewReader("x"), objstore.PutOptions{})
		require.NoError(t, err)
		_, err = m.Client(t).StatObject(t.Context(), m.Bucket, "root-object", minio.StatObjectOptions{})
		require.NoError(t, err)
	})
}

// TestS3CanceledMultipartAborted: a canceled multipart upload is aborted,
// not left as an incomplete upload that holds storage forever.
func TestS3CanceledMultipartAborted(t *testing.T) {
	m := testenv.MinIO(t)
	s := openS3(t, m, "abort")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r := io.MultiReader(io.LimitReader(zeros{}, 40<<20), readerFunc(func([]byte) (int, error) {
		cancel()
		return 0, context.Canceled
	}))
	_, err := s.Put(ctx, "big", r, objstore.PutOptions{})
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, incomplete(t, m, "abort/big"))

	// The check itself sees an upload left open (MinIO lists uploads by
	// exact key only, hence the key, not a prefix).
	core := &minio.Core{Client: m.Client(t)}
	_, err = core.NewMultipartUpload(t.Context(), m.Bucket, "abort/open", minio.PutObjectOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"abort/open"}, incomplete(t, m, "abort/open"))
}

func incomplete(t *testing.T, m *testenv.MinIOServer, key string) []string {
	var keys []string
	for u := range m.Client(t).ListIncompleteUploads(t.Context(), m.Bucket, key, true) {
		require.NoError(t, u.Err)
		keys = append(keys, u.Key)
	}
	return keys
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// TestS3ForeignObjects: whoever else writes the bucket can add objects
// under names no Store writes; List leaves them out rather than handing a
// caller a key it could not use.
func TestS3ForeignObjects(t *testing.T) {
	m := testenv.MinIO(t)
	s := openS3(t, m, "shared")
	c := m.Client(t)
	for _, k := range []string{"shared/a b", "shared/.hidden", "shared/ü", "sharedX/near"} {
		_, err := c.PutObject(t.Context(), m.Bucket, k, strings.NewReader("planted"), 7, minio.PutObjectOptions{})
		require.NoError(t, err, k)
	}
	_, err := s.Put(t.Context(), "ok", strings.NewReader("mine"), objstore.PutOptions{})
	require.NoError(t, err)
	infos, err := s.List(t.Context(), "")
	require.NoError(t, err)
	require.Len(t, infos, 1)
	require.Equal(t, "ok", infos[0].Key)
}

// TestS3Outage: a stopped server is an *UnavailableError quickly (bounded
// by minio-go's few retries and the dial timeout, not by the caller's
// context), and the same Store works again once the server is back.
func TestS3Outage(t *testing.T) {
	m := testenv.MinIO(t)
	s := openS3(t, m, "outage")
	_, err := s.Put(t.Context(), "before", strings.NewReader("x"), objstore.PutOptions{})
	require.NoError(t, err)

	m.Stop()
	// The bound: a generous multiple of 3 retries × ≤1 s backoff; without
	// it a caller's context (here: the test's) would be all that ends it.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ops := map[string]func() error{
		"put": func() error {
			_, err := s.Put(ctx, "during", strings.NewReader("x"), objstore.PutOptions{})
			return err
		},
		"get":    func() error { _, err := s.Get(ctx, "before"); return err },
		"stat":   func() error { _, err := s.Stat(ctx, "before"); return err },
		"list":   func() error { _, err := s.List(ctx, ""); return err },
		"delete": func() error { return s.Delete(ctx, "before") },
	}
	for name, op := range ops {
		err := op()
		require.ErrorIs(t, err, objstore.ErrUnavailable, name)
		require.ErrorIs(t, err, exechost.ErrStoreUnavailable, name)
		require.NoError(t, ctx.Err(), "%s: ended by the server's absence, not by the caller's deadline", name)
		var ue *objstore.UnavailableError
		require.ErrorAs(t, err, &ue)
		require.Equal(t, m.Addr+": connection refused", ue.Reason, name)
		require.NotContains(t, err.Error(), m.SecretKey)
	}
	// Open reports the outage the same way.
	_, err = objstore.Open(ctx, m.StoreURL("outage"), m.Getenv)
	require.ErrorIs(t, err, objstore.ErrUnavailable)

	m.Start()
	rc, err := s.Get(t.Context(), "before")
	require.NoError(t, err)
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.Equal(t, "x", string(b))
}

// TestS3ReadFailsMidStream: the server going away while an object is read
// fails the read as unavailable (not a short, silently truncated object).
func TestS3ReadFailsMidStream(t *testing.T) {
	m := testenv.MinIO(t)
	s := openS3(t, m, "midstream")
	_, err := s.Put(t.Context(), "big", io.LimitReader(zeros{}, 64<<20), objstore.PutOptions{})
	require.NoError(t, err)
	rc, err := s.Get(t.Context(), "big")
	require.NoError(t, err)
	defer rc.Close()
	_, err = io.ReadFull(rc, make([]byte, 1<<20))
	require.NoError(t, err)
	m.Stop()
	_, err = io.Copy(io.Discard, rc)
	require.Error(t, err, "a 64 MiB object cannot have been buffered whole")
	require.ErrorIs(t, err, objstore.ErrUnavailable)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestS3OpenErrors(t *testing.T) {
	m := testenv.MinIO(t)
	ctx := t.Context()

	_, err := objstore.Open(ctx, "s3://no-such-bucket/p", m.Getenv)
	require.ErrorIs(t, err, objstore.ErrNoSuchBucket)
	require.NotErrorIs(t, err, objstore.ErrUnavailable, "a missing bucket is configuration, not an outage")
	require.ErrorContains(t, err, "no-such-bucket")

	wrong := func(k string) string {
		if k == "AWS_SECRET_ACCESS_KEY" {
			return "wrong-secret-value"
		}
		return m.Getenv(k)
	}
	_, err = objstore.Open(ctx, m.StoreURL("p"), wrong)
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	var ue *objstore.UnavailableError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, m.Addr+": access denied", ue.Reason)
	require.NotContains(t, err.Error(), "wrong-secret-value")
	require.NotContains(t, err.Error(), m.AccessKey[2:], "no credential in the message")

	// Credentials that go bad after Open: each operation says so.
	s, err := objstore.NewS3(objstore.S3Config{Bucket: m.Bucket, Endpoint: m.Endpoint, AccessKey: m.AccessKey, SecretKey: "nope-nope-nope"})
	require.NoError(t, err)
	_, err = s.Put(ctx, "k", strings.NewReader("x"), objstore.PutOptions{})
	require.ErrorAs(t, err, &ue)
	require.Equal(t, m.Addr+": access denied", ue.Reason)
	_, err = s.Get(ctx, "k")
	require.True(t, errors.Is(err, objstore.ErrUnavailable), "%v", err)
}
