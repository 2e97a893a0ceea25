package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/internal/testenv"
)

// TestPreflightWorkflow: one Preflight activity with the Plan's request,
// its report returned as is; an activity that fails or times out fails the
// workflow (never retried), a check that fails does not.
func TestPreflightWorkflow(t *testing.T) {
	plan := testPlan(tool("fetch"), approvalStep("review", time.Hour, "fetch"), tool("send", "review"))
	plan.Secrets = []spec.SecretDecl{{Name: "tok", Source: "vault://prod/app/token"}}
	plan.Steps[2].Secrets = []string{"tok"}
	report := &activities.PreflightReport{Worker: "w1", Checks: []activities.PreflightCheck{
		{Kind: activities.CheckImage, Step: "fetch", Target: testImage, Status: activities.CheckOK},
		{Kind: activities.CheckSecret, Step: "send", Target: "tok (vault)", Status: activities.CheckFail, Reason: "permission denied"},
	}}
	tests := []struct {
		name    string
		timeout time.Duration
		act     func(context.Context, activities.PreflightRequest) (*activities.PreflightReport, error)
		wantErr string
	}{
		{name: "report", act: func(context.Context, activities.PreflightRequest) (*activities.PreflightReport, error) {
			return report, nil
		}},
		{name: "activity fails", act: func(context.Context, activities.PreflightRequest) (*activities.PreflightReport, error) {
			return nil, temporal.NewApplicationError("boom", "Boom")
		}, wantErr: "boom"},
		{name: "activity times out", timeout: 5 * time.Second, act: func(context.Context, activities.PreflightRequest) (*activities.PreflightReport, error) {
			return nil, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE, nil)
		}, wantErr: "timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ts testsuite.WorkflowTestSuite
			env := testenv.WorkflowEnv(&ts)
			calls := 0
			env.RegisterActivityWithOptions(func(ctx context.Context, req activities.PreflightRequest) (*activities.PreflightReport, error) {
				calls++
				require.Equal(t, activities.PreflightRequestFor(&plan), req)
				return tc.act(ctx, req)
			}, activity.RegisterOptions{Name: "Preflight"})
			env.ExecuteWorkflow(PreflightWorkflow, PreflightInput{Plan: plan, Timeout: tc.timeout})
			require.True(t, env.IsWorkflowCompleted())
			require.Equal(t, 1, calls, "one activity, never retried")
			if tc.wantErr != "" {
				require.ErrorContains(t, env.GetWorkflowError(), tc.wantErr)
				return
			}
			require.NoError(t, env.GetWorkflowError())
			var got activities.PreflightReport
			require.NoError(t, env.GetWorkflowResult(&got))
			require.Equal(t, *report, got)
			require.Equal(t, 1, got.Failed())
		})
	}
}
