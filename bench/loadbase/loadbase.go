// Package loadbase is the floor the load harness (bench/load_test.go)
// measures the engine against: a bare Temporal workflow of K sequential
// no-op activities, with nothing of agentflow in it.
package loadbase

import (
	"context"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// WorkflowName and ActivityName are the baseline's registered names.
const (
	WorkflowName = "LoadBaseline"
	ActivityName = "LoadNoop"
)

// Workflow runs k no-op activities one after the other, as a linear
// agent of k steps does.
func Workflow(ctx workflow.Context, k int) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	for i := range k {
		var out int
		if err := workflow.ExecuteActivity(ctx, ActivityName, i).Get(ctx, &out); err != nil {
			return i, err
		}
	}
	return k, nil
}

// Activity does nothing.
func Activity(_ context.Context, i int) (int, error) { return i, nil }
