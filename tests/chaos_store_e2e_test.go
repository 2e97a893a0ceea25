//go:build e2e

package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/workflows"
)

// TestChaosStoreOutage stops the workers' S3 store (MinIO) mid-run: the
// step's attempts must fail as infrastructure errors (never as the tool's
// failure), and the run complete once the store is back within the
// infrastructure budget, or fail with a message naming the store when it
// does not come back.
//
// Needs: the S3 store (slices objstore and checkpoints: --store), store
// failures typed StoreUnavailable (slices checkpoints and attempts) and
// infrastructure retries (slice infra-retries).
func TestChaosStoreOutage(t *testing.T) {
	e := newChaosStore(t, "store", "", chaosMinIO)
	m := e.minio
	e.startWorker(t, "a")
	e.startWorker(t, "b")

	t.Run("back within the bound", func(t *testing.T) {
		id := e.queue + "-back"
		// slow restores first's checkpoint from the store, and writes its
		// own there when its tool ends: both need the store.
		first := e.step("first", "wsfile", map[string]any{"write": map[string]any{"a.txt": "from first"}})
		slow := e.step("slow", "testtool", map[string]any{"mode": "sleep", "seconds": 8}, "first")
		run := e.submit(t, id, first, slow)
		e.waitToolRunning(t, id, "slow")
		m.Stop()
		// The store stays down until an attempt of slow has failed.
		require.Eventually(t, func() bool { return len(e.stepAttemptsQuiet(t, id, run.GetRunID(), "slow")) > 0 },
			chaosBound, time.Second, "no attempt of slow ended while the store was down")
		m.Start()

		st := e.waitRun(t, run)
		atts := e.stepAttempts(t, id, run.GetRunID(), "slow")
		require.NotEmpty(t, atts)
		for _, a := range atts[:len(atts)-1] {
			assert.Equal(t, "failed", a.Outcome, "%+v", a)
			assert.True(t, failure.Infrastructure(a.Type), "an attempt during the outage failed as %s: %s", a.Type, a.Message)
		}
		require.Equal(t, workflows.RunSucceeded, st.Status)
		require.Equal(t, "completed", atts[len(atts)-1].Outcome)
		require.GreaterOrEqual(t, stepRecord(t, st, "slow").Attempts, int32(2))
		e.requireNoSandboxes(t, id, time.Minute)
	})

	t.Run("not back", func(t *testing.T) {
		id := e.queue + "-gone"
		m.Stop()
		t.Cleanup(m.Start) // for the next user of the server, if any
		run := e.submit(t, id, e.step("only", "wsfile", map[string]any{"write": map[string]any{"a.txt": "a"}}))
		st := e.waitRun(t, run)
		require.Equal(t, workflows.RunFailed, st.Status)
		rec := stepRecord(t, st, "only")
		require.Equal(t, workflows.StepFailed, rec.Status)
		require.Contains(t, rec.Error, failure.StoreUnavailable)
		// The message names the store (its bucket or endpoint), never its
		// credentials.
		require.True(t, strings.Contains(rec.Error, m.Bucket) || strings.Contains(rec.Error, m.Addr),
			"the step's error does not name the store: %s", rec.Error)
		require.NotContains(t, rec.Error, m.SecretKey)
		for _, a := range e.stepAttempts(t, id, run.GetRunID(), "only") {
			assert.Equal(t, "failed", a.Outcome, "%+v", a)
			assert.True(t, failure.Infrastructure(a.Type), "attempt failed as %s: %s", a.Type, a.Message)
		}
		e.requireNoSandboxes(t, id, time.Minute)
	})
}
