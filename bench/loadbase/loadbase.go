// Package loadbase is the floor the load harness (bench/load_test.go)
// measures the engine against: a bare Temporal workflow of K sequential
// no-op activities, with nothing of agentflow in it; and the same floor
// with one of the things an agentflow run asks of the server added at a
// time (Extras), which attributes the engine's cost over the floor.
package loadbase

import (
	"context"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// WorkflowName and ActivityName are the baseline's registered names;
// ExtendedName and ExtendedActivityName the floor with Extras.
const (
	WorkflowName         = "LoadBaseline"
	ActivityName         = "LoadNoop"
	ExtendedName         = "LoadBaselineExtended"
	ExtendedActivityName = "LoadNoopExtended"
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

// Extras are the floor plus what an agentflow run does beyond it, each
// on its own (the engine's shapes: activities/budget.go, workflows).
type Extras struct {
	Steps int
	// Heartbeat: each activity records one heartbeat at its start, under
	// a 20 s heartbeat timeout (RunStep's first heartbeat names the worker).
	Heartbeat bool `json:",omitempty"`
	// StatusUpserts: a keyword search attribute upserted at the start
	// (RUNNING) and before the end (the final status), as AgentStatus is.
	// The starter sets the search attributes and memo a run starts with.
	StatusUpserts bool `json:",omitempty"`
	// Version: one GetVersion (a marker and the SDK's
	// TemporalChangeVersion upsert), as agentflow-infra-retries is.
	Version bool `json:",omitempty"`
	// EndLocal: a local activity at the end, as RunEnded is.
	EndLocal bool `json:",omitempty"`
	// PayloadBytes pads each activity's input and result to about this
	// size (a StepRequest / StepResult).
	PayloadBytes int `json:",omitempty"`
	// StatusKey is the keyword search attribute StatusUpserts writes.
	StatusKey string `json:",omitempty"`
}

// ActivityIn and ActivityOut are the extended activity's payloads.
type ActivityIn struct {
	I         int
	Heartbeat bool
	Pad       string `json:",omitempty"`
}

type ActivityOut struct {
	I   int
	Pad string `json:",omitempty"`
}

// Extended is Workflow with x's extras.
func Extended(ctx workflow.Context, x Extras) (int, error) {
	ao := workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	}
	if x.Heartbeat {
		ao.HeartbeatTimeout = 20 * time.Second
	}
	ctx = workflow.WithActivityOptions(ctx, ao)
	status := temporal.NewSearchAttributeKeyKeyword(x.StatusKey)
	if x.StatusUpserts {
		if err := workflow.UpsertTypedSearchAttributes(ctx, status.ValueSet("RUNNING")); err != nil {
			return 0, err
		}
	}
	if x.Version {
		workflow.GetVersion(ctx, "loadbase-extras", workflow.DefaultVersion, 1)
	}
	pad := strings.Repeat("x", x.PayloadBytes)
	for i := range x.Steps {
		var out ActivityOut
		in := ActivityIn{I: i, Heartbeat: x.Heartbeat, Pad: pad}
		if err := workflow.ExecuteActivity(ctx, ExtendedActivityName, in).Get(ctx, &out); err != nil {
			return i, err
		}
	}
	if x.StatusUpserts {
		if err := workflow.UpsertTypedSearchAttributes(ctx, status.ValueSet("SUCCEEDED")); err != nil {
			return 0, err
		}
	}
	if x.EndLocal {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 5 * time.Second})
		if err := workflow.ExecuteLocalActivity(lctx, EndActivity, x.Steps).Get(ctx, nil); err != nil {
			return 0, err
		}
	}
	return x.Steps, nil
}

// ExtendedActivity does nothing but what in asks of the server.
func ExtendedActivity(ctx context.Context, in ActivityIn) (ActivityOut, error) {
	if in.Heartbeat {
		activity.RecordHeartbeat(ctx, "start", "worker")
	}
	return ActivityOut{I: in.I, Pad: in.Pad}, nil
}

// EndActivity does nothing (a local activity's marker is the cost).
func EndActivity(_ context.Context, _ int) error { return nil }
