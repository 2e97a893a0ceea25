//go:build integration

package worker

import (
	"strings"
	"testing"

	"github.com/docker/docker/errdefs"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/metrics"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/internal/testenv"
)

// TestDockerBackendAnswersPreflight: the worker's real Docker backend
// wired into the Preflight activity as the worker wires it (Backend.Images,
// Backend.Hosts): a present image is ok, a missing digest fails naming the
// image and this worker, nothing is pulled; egress hosts resolve through
// --egress-resolve.
func TestDockerBackendAnswersPreflight(t *testing.T) {
	c := testenv.Docker(t)
	base, err := c.ImageInspect(t.Context(), "agentflow/base:latest")
	require.NoError(t, err, "run `make images` first")
	reg := testenv.Registry(t)
	missing := reg.Addr + "/agentflow/echo@sha256:" + strings.Repeat("0", 64)

	cfg := quietConfig(t.TempDir())
	cfg.Preflight, cfg.Identity = PreflightOff, "dryrun-worker"
	cfg.Egress.Resolve = map[string]string{"upstream.test": "192.0.2.10"}
	stores, err := openStores(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(stores.Close)
	checkpoints, _, err := openCheckpoints(cfg, stores.Checkpoints)
	require.NoError(t, err)
	b, err := newDockerBackend(t.Context(), cfg, checkpoints, metrics.New())
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	require.NotNil(t, b.Images)
	require.NotNil(t, b.Hosts)

	acts := activities.New(activities.Options{Host: b.Host, Identity: cfg.Identity, Images: b.Images, Hosts: b.Hosts})
	rep, err := acts.Preflight(t.Context(), activities.PreflightRequest{Steps: []activities.PreflightStep{
		{ID: "present", Image: base.ID},
		{ID: "missing", Image: missing, Egress: []spec.EgressRule{{Host: "upstream.test", Port: 443}}},
	}})
	require.NoError(t, err)
	t.Logf("%+v", rep.Checks)
	require.Equal(t, "dryrun-worker", rep.Worker)
	require.Len(t, rep.Checks, 3)
	require.Equal(t, activities.PreflightCheck{Kind: "image", Step: "present", Target: base.ID, Status: "ok", Reason: "present on the worker's daemon"}, rep.Checks[0])
	require.Equal(t, activities.CheckFail, rep.Checks[1].Status)
	require.Contains(t, rep.Checks[1].Reason, "image "+missing+" is not on worker dryrun-worker and its registry does not have it")
	egress := rep.Checks[2]
	require.Equal(t, "upstream.test:443", egress.Target)
	if egress.Status == activities.CheckFail {
		// No egress proxy image, or a runtime without networking: the
		// line says why, as a step with egress would fail.
		require.Contains(t, egress.Reason, "this worker serves no egress")
	} else {
		require.Equal(t, activities.PreflightCheck{Kind: "egress", Step: "missing", Target: "upstream.test:443", Status: "ok", Reason: "resolves to 192.0.2.10"}, egress)
	}
	_, err = c.ImageInspect(t.Context(), missing)
	require.True(t, errdefs.IsNotFound(err), "nothing pulled: %v", err)
}
