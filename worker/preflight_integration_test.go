//go:build integration

package worker

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/metrics"
	"github.com/agentflow/agentflow/internal/testenv"
)

// TestDockerBackendStartsWithEnforcedPreflight: the worker's Docker backend
// starts under every runtime in AGENTFLOW_TEST_RUNTIMES with --preflight
// enforce on this (sound) daemon; a check that cannot be observed under the
// runtime is logged as skipped with its reason, none as failed.
func TestDockerBackendStartsWithEnforcedPreflight(t *testing.T) {
	_ = testenv.Docker(t) // skip, or fail under AGENTFLOW_REQUIRE_DOCKER=1, without a daemon
	for _, rt := range testenv.Runtimes() {
		t.Run(rt, func(t *testing.T) {
			var logs bytes.Buffer
			cfg := quietConfig(t.TempDir())
			cfg.Runtime, cfg.Preflight = rt, PreflightEnforce
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			stores, err := openStores(t.Context(), cfg)
			require.NoError(t, err)
			t.Cleanup(stores.Close)
			checkpoints, _, err := openCheckpoints(cfg, stores.Checkpoints)
			require.NoError(t, err)
			b, err := newDockerBackend(t.Context(), cfg, checkpoints, metrics.New())
			require.NoError(t, err, "worker must start under %s with the preflight enforced:\n%s", rt, logs.String())
			t.Cleanup(func() { _ = b.Close() })
			out := logs.String()
			require.Contains(t, out, "sandbox_runtime="+rt)
			require.NotContains(t, out, "FAILED")
			require.Contains(t, out, "check=runtime_kernel")
			if rt == "runsc" {
				require.Contains(t, out, `check=seccomp_profile runtime=runsc reason="not observable under gVisor`)
			} else {
				require.NotContains(t, out, "check skipped")
			}
			t.Log(out)
		})
	}
}
