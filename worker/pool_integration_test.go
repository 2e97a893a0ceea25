//go:build integration

package worker

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/exechost/docker/policy"
	"github.com/agentflow/agentflow/internal/metrics"
	"github.com/agentflow/agentflow/internal/testenv"
)

// TestDockerBackendWarmPool: with --warm-pool the worker's Docker host
// serves a second step of the same shape from its pool (counted in
// agentflow_sandbox_pool_takes_total), and closing the backend (the
// worker stopping) removes every pooled sandbox.
func TestDockerBackendWarmPool(t *testing.T) {
	c := testenv.Docker(t)
	img, err := c.ImageInspect(t.Context(), "agentflow/base:latest")
	require.NoError(t, err, "run `make images` first")
	labels := map[string]string{"agentflow.test": "1", "agentflow.test.suite": fmt.Sprintf("worker-pool-%d", os.Getpid())}
	cfg := quietConfig(t.TempDir())
	cfg.Preflight, cfg.WarmPool, cfg.WarmPoolIdle, cfg.SandboxLabels = PreflightOff, 1, time.Minute, labels
	stores, err := openStores(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(stores.Close)
	checkpoints, _, err := openCheckpoints(cfg, stores.Checkpoints)
	require.NoError(t, err)
	m := metrics.New()
	b, err := newDockerBackend(t.Context(), cfg, checkpoints, m)
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = b.Close()
		}
	})
	host := b.Host.(*docker.Host)
	pooled := func() []container.Summary {
		list, err := c.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(
			filters.Arg("label", policy.LabelPool), filters.Arg("label", policy.LabelOwner+"="+host.Owner()))})
		require.NoError(t, err)
		return list
	}

	step := func(n int) {
		req := exechost.ProvisionRequest{ExecutionID: exechost.ExecutionID(fmt.Sprintf("worker-pool-%d-%d", os.Getpid(), n)),
			Image: img.ID, Network: exechost.NetworkNone, Labels: labels,
			Resources: exechost.ResourceLimits{NanoCPUs: 1e9, MemoryBytes: 64 << 20, DiskBytes: 16 << 20, Pids: 32,
				Runtime: time.Minute, MaxOutputBytes: 1 << 20}}
		x, err := host.Provision(t.Context(), req)
		require.NoError(t, err)
		require.NoError(t, host.Terminate(t.Context(), x.ExecutionID))
	}
	step(1) // a miss: the pool learns the shape
	require.Eventually(t, func() bool { return host.PoolStats().Idle == 1 }, time.Minute, 50*time.Millisecond)
	step(2)
	require.Equal(t, 1.0, testutil.ToFloat64(m.PoolTakes.WithLabelValues("miss")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.PoolTakes.WithLabelValues("hit")))
	require.Eventually(t, func() bool { return host.PoolStats().Idle == 1 }, time.Minute, 50*time.Millisecond)
	require.Len(t, pooled(), 1)

	closed = true
	require.NoError(t, b.Close())
	require.Empty(t, pooled(), "the worker drains its pool when it stops")
}
