package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/spec"
)

// PreflightWorkflowName is the workflow type of `agentctl run --dry-run`'s
// check on a worker.
const PreflightWorkflowName = "PreflightWorkflow"

// DefaultPreflightTimeout is how long a preflight may take, from start to
// report, when the starter does not say (agentctl --preflight-timeout).
const DefaultPreflightTimeout = 30 * time.Second

// PreflightInput is the workflow input: the compiled Plan with tools
// already resolved to images (as AgentWorkflow gets it), and the time the
// check may take in all.
type PreflightInput struct {
	Plan    spec.Plan     `json:"plan"`
	Timeout time.Duration `json:"timeout,omitempty"`
}

// PreflightWorkflow runs one Preflight activity on its own task queue (the
// run's: any worker that would take the run's steps may answer) and
// returns its report. It is short-lived and retries nothing: the starter
// also bounds the whole execution (WorkflowExecutionTimeout) so a
// preflight no worker takes ends on the server instead of lingering.
func PreflightWorkflow(ctx workflow.Context, in PreflightInput) (*activities.PreflightReport, error) {
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = DefaultPreflightTimeout
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// One deadline from scheduling to result: waiting for a worker
		// and checking share it.
		ScheduleToCloseTimeout: timeout,
		Summary:                fmt.Sprintf("preflight %s %s", in.Plan.Name, in.Plan.Version),
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var rep activities.PreflightReport
	if err := workflow.ExecuteActivity(actx, acts.Preflight, activities.PreflightRequestFor(&in.Plan)).Get(actx, &rep); err != nil {
		return nil, fmt.Errorf("preflight activity: %w", err)
	}
	return &rep, nil
}
