//go:build integration

package checkpoint

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/testenv"
)

func openMinIO(t *testing.T, srv *testenv.MinIOServer, prefix string) objstore.Store {
	t.Helper()
	s, err := objstore.Open(t.Context(), srv.StoreURL(prefix), srv.Getenv)
	require.NoError(t, err)
	return s
}

// TestObjectOverMinIO runs the checkpoint-store contract against a real S3
// server, each case under a prefix of its own.
func TestObjectOverMinIO(t *testing.T) {
	srv := testenv.MinIO(t)
	n := 0
	runObjectTests(t, func(t *testing.T) objstore.Store {
		n++
		return openMinIO(t, srv, fmt.Sprintf("contract-%d/checkpoints", n))
	})
}

// TestObjectMinIOOutage: with the server down every operation is one
// StoreUnavailable error naming the store; once it is back the same store
// works again and nothing half-written became visible.
func TestObjectMinIOOutage(t *testing.T) {
	srv := testenv.MinIO(t)
	raw := openMinIO(t, srv, "outage/checkpoints")
	s := NewObject(raw)
	ctx := t.Context()
	_, err := s.Put(ctx, validManifest(), strings.NewReader("before"), nil)
	require.NoError(t, err)

	srv.Stop()
	m2 := validManifest()
	m2.ID = "ckpt-2"
	_, err = s.Put(ctx, m2, strings.NewReader("during"), nil)
	require.ErrorIs(t, err, exechost.ErrStoreUnavailable)
	t.Logf("put during the outage: %v", err)
	require.Contains(t, err.Error(), "checkpoint store "+raw.String()+" unavailable")
	require.Equal(t, 1, strings.Count(err.Error(), "unavailable"), err.Error())
	_, _, err = s.Get(ctx, "ckpt-1")
	require.ErrorIs(t, err, exechost.ErrStoreUnavailable)
	require.NotErrorIs(t, err, exechost.ErrNotFound, "an outage is not a missing checkpoint")

	srv.Start()
	_, rc, err := s.Get(ctx, "ckpt-1")
	require.NoError(t, err)
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	rc.Close()
	require.Equal(t, "before", string(b))
	_, err = s.Stat(ctx, "ckpt-2")
	require.ErrorIs(t, err, exechost.ErrNotFound, "the Put that failed left nothing visible")
	_, err = s.Put(ctx, m2, strings.NewReader("after"), nil)
	require.NoError(t, err)
}
