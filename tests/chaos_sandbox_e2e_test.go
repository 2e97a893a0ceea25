//go:build e2e

package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/workflows"
)

// Needs: lost-sandbox detection in the Docker host (slice attempts: a
// sandbox killed or removed from outside is exechost.ErrTerminated →
// SandboxLost, no checkpoint) and infrastructure retries (slice
// infra-retries). Today the attempt is reported `ToolFailed: exit 137`,
// the worker tries to checkpoint the dead container, and a step without
// retries fails.
func TestChaosSandboxKilledFromOutside(t *testing.T) {
	e := newChaos(t, "sandbox", "")
	e.startWorker(t, "a")
	e.startWorker(t, "b")

	for _, tc := range []struct {
		name string
		kill func(ctx context.Context, id string) error
	}{
		{"docker kill", func(ctx context.Context, id string) error { return e.docker.ContainerKill(ctx, id, "KILL") }},
		{"docker rm -f", func(ctx context.Context, id string) error {
			return e.docker.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := e.queue + "-" + strings.NewReplacer(" ", "", "-", "").Replace(tc.name)
			run := e.submit(t, id, e.step("slow", "testtool", map[string]any{"mode": "sleep", "seconds": 30}))

			r := e.waitToolRunning(t, id, "slow")
			require.NoError(t, tc.kill(t.Context(), r.containerID))

			st := e.waitRun(t, run)
			atts := e.stepAttempts(t, id, run.GetRunID(), "slow")
			require.NotEmpty(t, atts)
			first := atts[0]
			// assert, not require: one report shows every part of the fault.
			assert.Equal(t, "failed", first.Outcome, "%+v", first)
			assert.Equal(t, failure.SandboxLost, first.Type, "first attempt classified as %s: %s", first.Type, first.Message)
			// No checkpoint of the dead sandbox: none recorded with the
			// failure, and the worker did not try (it logs a failed try).
			assert.NotContains(t, first.Details, `"checkpoint_id"`, "the lost attempt has a checkpoint")
			owner := e.worker(t, r.worker)
			for _, line := range strings.Split(owner.log(), "\n") {
				if strings.Contains(line, "agent_id="+id+" ") {
					assert.NotContains(t, line, "checkpoint of failed attempt", "the worker tried to checkpoint the dead sandbox")
				}
			}

			require.Equal(t, workflows.RunSucceeded, st.Status)
			rec := stepRecord(t, st, "slow")
			require.Equal(t, workflows.StepSuccess, rec.Status)
			require.GreaterOrEqual(t, rec.Attempts, int32(2))
			e.requireNoSandboxes(t, id, time.Minute)
		})
	}
}
