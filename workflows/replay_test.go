package workflows

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplayHistories replays every recorded history (see
// testdata/README.md) against the current AgentWorkflow. A change that
// alters the commands an existing run emits, without workflow.GetVersion,
// fails here before it can wedge runs in production.
func TestReplayHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories: the replay test would prove nothing")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(AgentWorkflow, workflow.RegisterOptions{Name: WorkflowName})
			logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})))
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(logger, f))
		})
	}
}

// TestReplayDetectsNonDeterminism proves the replay test has teeth: the
// recorded diamond history does not replay against a workflow that
// schedules differently.
func TestReplayDetectsNonDeterminism(t *testing.T) {
	f := filepath.Join("testdata", "histories", "diamond.json")
	_, err := os.Stat(f)
	require.NoError(t, err)
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(func(ctx workflow.Context, in Input) (*Result, error) {
		// Same input, but the steps run in reverse spec order.
		for i, j := 0, len(in.Plan.Steps)-1; i < j; i, j = i+1, j-1 {
			in.Plan.Steps[i], in.Plan.Steps[j] = in.Plan.Steps[j], in.Plan.Steps[i]
		}
		for i := range in.Plan.Steps {
			in.Plan.Steps[i].DependsOn = nil
		}
		return AgentWorkflow(ctx, in)
	}, workflow.RegisterOptions{Name: WorkflowName})
	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError})))
	require.Error(t, r.ReplayWorkflowHistoryFromJSONFile(logger, f))
}

// TestReplayPinsInfraRetries: the infra-retries history pins the attempt
// loop of changeInfraRetries. A workflow that no longer retries b's tool
// failure (retries 0) emits different commands for it and must not replay.
func TestReplayPinsInfraRetries(t *testing.T) {
	f := filepath.Join("testdata", "histories", "infra-retries.json")
	_, err := os.Stat(f)
	require.NoError(t, err)
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(func(ctx workflow.Context, in Input) (*Result, error) {
		in.Plan.Steps[1].Retries = 0
		return AgentWorkflow(ctx, in)
	}, workflow.RegisterOptions{Name: WorkflowName})
	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError})))
	err = r.ReplayWorkflowHistoryFromJSONFile(logger, f)
	require.ErrorContains(t, err, "nondeterministic")
}

// TestReplayPinsRunEndedLocal: the run-end-local history (changeInfraRetries
// v2, no webhooks) ends without RunFinished. A workflow that would deliver
// (a notify URL) schedules it and must not replay.
func TestReplayPinsRunEndedLocal(t *testing.T) {
	f := filepath.Join("testdata", "histories", "run-end-local.json")
	_, err := os.Stat(f)
	require.NoError(t, err)
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(func(ctx workflow.Context, in Input) (*Result, error) {
		in.Plan.Notify = []string{"https://hooks.example/agentflow"}
		return AgentWorkflow(ctx, in)
	}, workflow.RegisterOptions{Name: WorkflowName})
	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError})))
	err = r.ReplayWorkflowHistoryFromJSONFile(logger, f)
	require.ErrorContains(t, err, "nondeterministic")
}
