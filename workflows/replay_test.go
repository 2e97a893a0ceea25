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

// replayAltered replays a recorded history against AgentWorkflow with its
// input altered first: the alterations a history must refuse.
func replayAltered(t *testing.T, history string, alter func(*Input)) error {
	t.Helper()
	f := filepath.Join("testdata", "histories", history)
	_, err := os.Stat(f)
	require.NoError(t, err)
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(func(ctx workflow.Context, in Input) (*Result, error) {
		alter(&in)
		return AgentWorkflow(ctx, in)
	}, workflow.RegisterOptions{Name: WorkflowName})
	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError})))
	return r.ReplayWorkflowHistoryFromJSONFile(logger, f)
}

// TestReplayDetectsNonDeterminism proves the replay test has teeth: the
// recorded diamond history does not replay against a workflow that
// schedules differently.
func TestReplayDetectsNonDeterminism(t *testing.T) {
	err := replayAltered(t, "diamond.json", func(in *Input) {
		// Same input, but the steps run in reverse spec order.
		for i, j := 0, len(in.Plan.Steps)-1; i < j; i, j = i+1, j-1 {
			in.Plan.Steps[i], in.Plan.Steps[j] = in.Plan.Steps[j], in.Plan.Steps[i]
		}
		for i := range in.Plan.Steps {
			in.Plan.Steps[i].DependsOn = nil
		}
	})
	require.Error(t, err)
}

// TestReplayPinsInfraRetries: the infra-retries history pins the attempt
// loop of changeInfraRetries. A workflow that no longer retries b's tool
// failure (retries 0) emits different commands for it and must not replay.
func TestReplayPinsInfraRetries(t *testing.T) {
	err := replayAltered(t, "infra-retries.json", func(in *Input) { in.Plan.Steps[1].Retries = 0 })
	require.ErrorContains(t, err, "nondeterministic")
}

// TestReplayPinsRunEndedLocal: the run-end-local history (changeInfraRetries
// v2, no webhooks) ends without RunFinished. A workflow that would deliver
// (a notify URL) schedules it and must not replay.
func TestReplayPinsRunEndedLocal(t *testing.T) {
	err := replayAltered(t, "run-end-local.json", func(in *Input) {
		in.Plan.Notify = []string{"https://hooks.example/agentflow"}
	})
	require.ErrorContains(t, err, "nondeterministic")
}
