//go:build integration

package worker

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/testenv"
)

// TestSharedStoreOnMinIO: with --store s3://… the worker's checkpoints land
// under checkpoints/ in the bucket, signed, where a second worker with the
// same key file (another machine: other local directories) reads them; a
// worker with its own generated key cannot. A store that is down at start
// stops the worker with an error naming it.
func TestSharedStoreOnMinIO(t *testing.T) {
	srv := testenv.MinIO(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v) // the worker reads the AWS variables from its environment
	}
	key := sharedKeyFile(t)
	open := func(base string) (*Stores, Config) {
		cfg := quietConfig(base)
		cfg.Store, cfg.CheckpointKeyFile = srv.StoreURL("team"), key
		s, err := openStores(t.Context(), cfg)
		require.NoError(t, err)
		t.Cleanup(s.Close)
		return s, cfg
	}
	a, cfgA := open(t.TempDir())
	b, cfgB := open(t.TempDir())
	require.Equal(t, srv.StoreURL("team")+"/checkpoints", a.Checkpoints.String())

	ckA, err := checkpointStore(cfgA, a.Checkpoints)
	require.NoError(t, err)
	m, err := ckA.Put(t.Context(), testManifest(), strings.NewReader("from worker a"), nil)
	require.NoError(t, err)

	root, err := objstore.Open(t.Context(), srv.StoreURL("team"), srv.Getenv)
	require.NoError(t, err)
	infos, err := root.List(t.Context(), "checkpoints/")
	require.NoError(t, err)
	require.Len(t, infos, 2, "content and manifest under checkpoints/: %v", infos)

	ckB, err := checkpointStore(cfgB, b.Checkpoints)
	require.NoError(t, err)
	_, rc, err := ckB.Get(t.Context(), m.ID)
	require.NoError(t, err, "another worker with the shared key restores it")
	got, err := io.ReadAll(rc)
	require.NoError(t, err)
	rc.Close()
	require.Equal(t, "from worker a", string(got))

	own := cfgB
	own.CheckpointKeyFile = "" // as if the rule were not there: a generated key
	ckOwn, err := checkpointStore(own, b.Checkpoints)
	require.NoError(t, err)
	_, err = ckOwn.Stat(t.Context(), m.ID)
	require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint, "why the shared key is required")

	srv.Stop()
	_, err = openStores(t.Context(), cfgA)
	require.ErrorIs(t, err, exechost.ErrStoreUnavailable)
	require.ErrorContains(t, err, srv.StoreURL("team"))
	t.Logf("start with the store down: %v", err)
}
