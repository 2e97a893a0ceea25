package workflows

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"

	"github.com/agentflow/agentflow/activities"
)

// A step that requests GPUs is scheduled on the run's GPU task queue, every
// other step on the run's own queue, under both attempt models.
func TestGPUStepsGoToTheGPUQueue(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		name := "infra retries"
		if legacy {
			name = "legacy retries"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			if legacy {
				h.legacyRetries()
			}
			var mu sync.Mutex
			queues := map[string]string{}
			record := func(ctx context.Context, req activities.StepRequest) (*activities.StepResult, error) {
				mu.Lock()
				defer mu.Unlock()
				queues[req.StepID] = activity.GetInfo(ctx).TaskQueue
				return &activities.StepResult{Output: map[string]any{}}, nil
			}
			gpu, all := tool("train"), tool("render", "train")
			gpu.Resources.GPUs, all.Resources.GPUs = 1, -1
			h.onStep("prep", record)
			h.onStep("train", record)
			h.onStep("render", record)
			o := h.run(Input{Plan: testPlan(tool("prep"), gpu, all)})
			require.NoError(t, o.err)
			q := queues["prep"]
			require.NotEmpty(t, q)
			require.Equal(t, map[string]string{"prep": q, "train": GPUTaskQueue(q), "render": GPUTaskQueue(q)}, queues)
		})
	}
}
