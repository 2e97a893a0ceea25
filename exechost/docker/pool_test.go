package docker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
)

// noClient is a Client that is never called (pure tests).
type noClient struct{ Client }

func pureHost(t *testing.T, runtime string) *Host {
	t.Helper()
	store, err := checkpoint.NewLocal(t.TempDir())
	require.NoError(t, err)
	h, err := New(Options{Client: noClient{}, Store: store, Owner: "me", Runtime: runtime})
	require.NoError(t, err)
	return h
}

func poolReq() exechost.ProvisionRequest {
	return exechost.ProvisionRequest{
		ExecutionID: "a/r/s/1", Image: "sha256:abc", Network: exechost.NetworkNone,
		Resources: exechost.ResourceLimits{NanoCPUs: 1e9, MemoryBytes: 128 << 20, DiskBytes: 32 << 20, Pids: 64,
			Runtime: time.Minute, MaxOutputBytes: 1 << 20},
		Env:    map[string]string{"A": "1"},
		Labels: map[string]string{"agentflow.test": "1", "agentflow.run_id": "r"},
	}
}

// TestPoolKey: requests that differ only per execution share a key; any
// difference in the container configuration a request determines (limits,
// tmpfs size, runtime, image, the host's OCI runtime) does not.
func TestPoolKey(t *testing.T) {
	h := pureHost(t, "")
	base := h.poolKey(poolReq(), "sha256:img")
	same := map[string]func(*exechost.ProvisionRequest){
		"execution id": func(r *exechost.ProvisionRequest) { r.ExecutionID = "other" },
		"env":          func(r *exechost.ProvisionRequest) { r.Env = map[string]string{"B": "2"} },
		"labels":       func(r *exechost.ProvisionRequest) { r.Labels = nil },
		"checkpoints":  func(r *exechost.ProvisionRequest) { r.Workspace.Checkpoints = []exechost.CheckpointID{"c"} },
		"output cap":   func(r *exechost.ProvisionRequest) { r.Resources.MaxOutputBytes = 1 << 10 }, // an exec limit
	}
	for name, mutate := range same {
		r := poolReq()
		mutate(&r)
		require.Equal(t, base, h.poolKey(r, "sha256:img"), name)
	}
	differ := map[string]func(*exechost.ProvisionRequest){
		"cpus":    func(r *exechost.ProvisionRequest) { r.Resources.NanoCPUs = 2e9 },
		"memory":  func(r *exechost.ProvisionRequest) { r.Resources.MemoryBytes = 64 << 20 },
		"disk":    func(r *exechost.ProvisionRequest) { r.Resources.DiskBytes = 16 << 20 },
		"pids":    func(r *exechost.ProvisionRequest) { r.Resources.Pids = 65 },
		"runtime": func(r *exechost.ProvisionRequest) { r.Resources.Runtime = 2 * time.Minute },
	}
	for name, mutate := range differ {
		r := poolReq()
		mutate(&r)
		require.NotEqual(t, base, h.poolKey(r, "sha256:img"), name)
	}
	require.NotEqual(t, base, h.poolKey(poolReq(), "sha256:other"), "image")
	require.NotEqual(t, base, pureHost(t, "runsc").poolKey(poolReq(), "sha256:img"), "OCI runtime")
}

func TestPoolable(t *testing.T) {
	p := &pool{opts: PoolOptions{Labels: map[string]string{"agentflow.test": "1"}}}
	tests := []struct {
		name   string
		mutate func(*exechost.ProvisionRequest)
		want   bool
	}{
		{name: "plain", want: true},
		{name: "checkpoints", mutate: func(r *exechost.ProvisionRequest) { r.Workspace.Checkpoints = []exechost.CheckpointID{"c"} }, want: true},
		{name: "egress", mutate: func(r *exechost.ProvisionRequest) { r.Network = exechost.NetworkEgress }},
		{name: "gpu", mutate: func(r *exechost.ProvisionRequest) { r.Resources.GPUs = 1 }},
		{name: "all gpus", mutate: func(r *exechost.ProvisionRequest) { r.Resources.GPUs = -1 }},
		{name: "git", mutate: func(r *exechost.ProvisionRequest) {
			r.Workspace.Git = &exechost.GitSource{RepositoryPath: "/r", Revision: "HEAD"}
		}},
		{name: "without the pool's labels", mutate: func(r *exechost.ProvisionRequest) { r.Labels = nil }},
		{name: "other value of a pool label", mutate: func(r *exechost.ProvisionRequest) { r.Labels["agentflow.test"] = "2" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := poolReq()
			if tc.mutate != nil {
				tc.mutate(&r)
			}
			require.Equal(t, tc.want, p.poolable(r))
		})
	}
}

// fakeDocker is just enough of a daemon for the pool's bookkeeping.
type fakeDocker struct {
	noClient
	mu   sync.Mutex
	n    int
	live map[string]bool
}

func (f *fakeDocker) ContainerCreate(context.Context, *container.Config, *container.HostConfig, *network.NetworkingConfig, *ocispec.Platform, string) (container.CreateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	id := fmt.Sprintf("c%d", f.n)
	f.live[id] = true
	return container.CreateResponse{ID: id}, nil
}

func (f *fakeDocker) ContainerStart(context.Context, string, container.StartOptions) error {
	return nil
}

func (f *fakeDocker) ContainerRemove(_ context.Context, id string, _ container.RemoveOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.live, id)
	return nil
}

func (f *fakeDocker) ContainerInspect(_ context.Context, id string) (container.InspectResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.live[id] {
		return container.InspectResponse{}, errdefs.NotFound(errors.New("no such container"))
	}
	return container.InspectResponse{}, nil
}

func (f *fakeDocker) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.live)
}

// idleOf is the number of idle sandboxes per key (test view).
func (p *pool) idleOf(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k := p.keys[key]; k != nil {
		return len(k.idle)
	}
	return -1
}

// TestPoolBookkeeping: keys are learned from misses and filled to Size;
// at MaxTotal the most recently used key takes the place of an older
// key's idle sandbox; a key unused for KeyIdle is dropped with its
// sandboxes; Drain removes the rest.
func TestPoolBookkeeping(t *testing.T) {
	f := &fakeDocker{live: map[string]bool{}}
	store, err := checkpoint.NewLocal(t.TempDir())
	require.NoError(t, err)
	h, err := New(Options{Client: f, Store: store, Owner: "me",
		Pool: PoolOptions{Size: 2, MaxTotal: 3, MaxIdle: time.Hour, KeyIdle: time.Hour}})
	require.NoError(t, err)
	p := h.pool
	reqA, reqB := poolReq(), poolReq()
	reqB.Resources.Runtime = 2 * time.Minute
	keyA, keyB := h.poolKey(reqA, "sha256:img"), h.poolKey(reqB, "sha256:img")
	settled := func(a, b int) func() bool {
		return func() bool { return p.idleOf(keyA) == a && p.idleOf(keyB) == b && f.count() == max(a, 0)+max(b, 0) }
	}

	require.Nil(t, p.take(reqA, "sha256:img"), "the first request of a key is a miss")
	require.Eventually(t, settled(2, -1), 10*time.Second, 5*time.Millisecond)
	m := p.take(reqA, "sha256:img")
	require.NotNil(t, m)
	p.release(m)
	require.NoError(t, f.ContainerRemove(t.Context(), m.containerID, container.RemoveOptions{})) // its Terminate
	require.Eventually(t, settled(2, -1), 10*time.Second, 5*time.Millisecond)

	require.Nil(t, p.take(reqB, "sha256:img"))
	require.Eventually(t, settled(1, 2), 10*time.Second, 5*time.Millisecond, "B, used last, displaces one of A's at the cap of 3")

	p.mu.Lock()
	p.keys[keyB].lastUsed = time.Now().Add(-2 * time.Hour)
	p.mu.Unlock()
	p.poke()
	require.Eventually(t, func() bool { return p.idleOf(keyB) == -1 && p.idleOf(keyA) == 2 && f.count() == 2 },
		10*time.Second, 5*time.Millisecond, "an idle key is dropped with its sandboxes; A refills")

	require.NoError(t, h.Drain(t.Context()))
	require.Zero(t, f.count())
	require.Nil(t, p.take(reqA, "sha256:img"), "no takes after Drain")
	st := h.PoolStats()
	require.Equal(t, 1, st.Hits)
	require.Equal(t, 2, st.Misses)
}
