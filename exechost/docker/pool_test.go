package docker

import (
	"testing"
	"time"

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
