//go:build integration

package docker_test

import (
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
