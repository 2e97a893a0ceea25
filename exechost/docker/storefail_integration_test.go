//go:build integration

package docker_test

import (
	"context"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/testenv"
)

// tinyDisk mounts a 1 MiB tmpfs for the test (root only; skipped, or failed
// under AGENTFLOW_REQUIRE_DOCKER=1, elsewhere).
func tinyDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=1m,mode=0700")
	testenv.Need(t, err == nil, "mount a 1 MiB tmpfs (needs root): %v", err)
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// TestCheckpointOnFullDisk: a checkpoint that does not fit its store is a
// store failure (StoreUnavailable, retried as infrastructure) with one
// message naming the store and the cause once — not SandboxLost with the
// cause nested twice — and leaves nothing behind.
func TestCheckpointOnFullDisk(t *testing.T) {
	c := dockerClient(t)
	requireRuntime(t, c)
	dir := tinyDisk(t)
	store, err := checkpoint.NewLocal(dir)
	require.NoError(t, err)
	keys, _, err := checkpoint.LoadOrCreateLocalKeyring(t.TempDir())
	require.NoError(t, err)
	sealed, err := checkpoint.NewSealed(store, keys, checkpoint.SealedOptions{})
	require.NoError(t, err)
	h, err := docker.New(docker.Options{Client: c, Store: sealed, KillGrace: time.Second, Runtime: sandboxRuntime})
	require.NoError(t, err)
	e := &env{c: c, host: h, store: store, sealed: sealed, keys: keys, base: imageID(t, c, baseTag)}

	x, _ := e.provision(t, nil)
	res := e.sh(t, x.ExecutionID, "head -c 3000000 /dev/urandom > big && echo ok")
	require.Equal(t, 0, res.ExitCode, string(res.Stderr))

	_, err = e.host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{Reason: "full disk"})
	require.Error(t, err)
	t.Logf("checkpoint error: %v", err)
	require.ErrorIs(t, err, exechost.ErrStoreUnavailable)
	require.Equal(t, failure.StoreUnavailable, failure.HostType(err, false))
	msg := err.Error()
	require.Contains(t, msg, "checkpoint store ")
	require.Contains(t, msg, dir, "the message names the store")
	require.Equal(t, 1, strings.Count(msg, "no space left on device"), msg)
	require.Equal(t, 1, strings.Count(msg, "unavailable"), msg)
	// The export had to be stopped, which for a docker exec means removing
	// the sandbox; the failure is still the store's, not a lost sandbox.
	require.NotErrorIs(t, err, exechost.ErrTerminated)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "no checkpoint and no temp file is left on the full disk")
}

// flakyReads serves the first n bytes of every checkpoint content object,
// then fails as a store that went away mid-download.
type flakyReads struct {
	objstore.Store
	n int64
}

func (f flakyReads) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := f.Store.Get(ctx, key)
	if err != nil || !strings.HasSuffix(key, ".tar") {
		return rc, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(rc, f.n), failAfter{&objstore.UnavailableError{
		Store: f.String(), Op: "get", Key: key, Reason: "connection reset by peer"}}), rc}, nil
}

type failAfter struct{ err error }

func (f failAfter) Read([]byte) (int, error) { return 0, f.err }

// TestRestoreWhenTheStoreFailsMidRead: a dependency's checkpoint whose
// download breaks off is a store failure (StoreUnavailable, retried), not a
// corrupt checkpoint (never retried) and not a lost sandbox; the half-filled
// sandbox is removed.
func TestRestoreWhenTheStoreFailsMidRead(t *testing.T) {
	e := setup(t)
	x, _ := e.provision(t, nil)
	res := e.sh(t, x.ExecutionID, "head -c 300000 /dev/urandom > blob && echo ok")
	require.Equal(t, 0, res.ExitCode, string(res.Stderr))
	ck, err := e.host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{})
	require.NoError(t, err)

	dir, err := objstore.NewDir(e.store.Dir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = dir.Close() })
	flaky, err := checkpoint.NewSealed(checkpoint.NewObject(flakyReads{Store: dir, n: 100000}), e.keys, checkpoint.SealedOptions{})
	require.NoError(t, err)
	h, err := docker.New(docker.Options{Client: e.c, Store: flaky, KillGrace: time.Second, Runtime: sandboxRuntime})
	require.NoError(t, err)

	id := newID(t)
	_, err = h.Provision(t.Context(), exechost.ProvisionRequest{ExecutionID: id, Image: e.base, Resources: limits(),
		Network: exechost.NetworkNone, Labels: testLabels, Workspace: exechost.Workspace{Checkpoints: []exechost.CheckpointID{ck.CheckpointID}}})
	require.Error(t, err)
	t.Logf("provision error: %v", err)
	require.ErrorIs(t, err, exechost.ErrStoreUnavailable)
	require.NotErrorIs(t, err, exechost.ErrCorruptCheckpoint)
	require.Equal(t, failure.StoreUnavailable, failure.HostType(err, false))
	require.Equal(t, 1, strings.Count(err.Error(), "connection reset by peer"), err.Error())
	e.requireGone(t, id)
}
