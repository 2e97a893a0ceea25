package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/workflows"
)

const pfImage = "agentflow/echo@sha256:0000000000000000000000000000000000000000000000000000000000000000"

func pfReport(checks ...activities.PreflightCheck) *activities.PreflightReport {
	return &activities.PreflightReport{Worker: "w1@host", Checks: checks}
}

// TestDryRunPreflight: the table first, then one line per check; exit 2
// when a check failed, the preflight's own error (no worker: exit 1) as
// is, and --offline asks no worker.
func TestDryRunPreflight(t *testing.T) {
	okImage := activities.PreflightCheck{Kind: "image", Step: "fetch", Target: pfImage, Status: "ok", Reason: "present on the worker's daemon"}
	failSecret := activities.PreflightCheck{Kind: "secret", Step: "notify", Target: "app_token (vault)", Status: "FAIL", Reason: "permission denied"}
	skipEgress := activities.PreflightCheck{Kind: "egress", Step: "notify", Target: "hooks.example.com:443", Status: "skip", Reason: "this worker cannot check egress hosts"}
	noWorker := &ExitError{Code: ExitFailure, Err: errors.New("no worker answered on task queue q1 within 30s")}
	tests := []struct {
		name      string
		offline   bool
		output    string
		report    *activities.PreflightReport
		err       error
		wantCode  int
		wantLines []string
		absent    []string
	}{
		{name: "all ok", report: pfReport(okImage), wantCode: ExitOK,
			wantLines: []string{"STEP", "preflight on worker w1@host (task queue q1):", "ok   image  step fetch  " + pfImage},
			absent:    []string{"present on the worker's daemon"}},
		{name: "a failed check exits 2", report: pfReport(okImage, failSecret, skipEgress), wantCode: ExitInvalid,
			wantLines: []string{
				"FAIL secret step notify  app_token (vault): permission denied",
				"skip egress step notify  hooks.example.com:443: this worker cannot check egress hosts",
			}},
		{name: "no worker exits 1", err: noWorker, wantCode: ExitFailure},
		{name: "offline checks here", offline: true, wantCode: ExitInvalid,
			wantLines: []string{"secrets:", "unset_env (env://AF_TEST_UNSET): NOT RESOLVABLE"}, absent: []string{"preflight on worker"}},
		{name: "json carries the report", output: "json", report: pfReport(okImage, failSecret), wantCode: ExitInvalid,
			wantLines: []string{`"preflight": {`, `"task_queue": "q1"`, `"status": "FAIL"`, `"ok": false`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			calls := 0
			o := &runOptions{
				Options:          &Options{Output: tc.output, Streams: Streams{Out: &out, Err: &out}},
				submitFlags:      submitFlags{TaskQueue: "q1"},
				Name:             "agent-7",
				Offline:          tc.offline,
				PreflightTimeout: 30 * time.Second,
				preflight: func(_ context.Context, _ client.Client, queue, agent string, plan *spec.Plan, timeout time.Duration) (*activities.PreflightReport, error) {
					calls++
					require.Equal(t, "q1", queue)
					require.Equal(t, "agent-7", agent)
					require.Equal(t, "demo", plan.Name)
					require.Equal(t, 30*time.Second, timeout)
					return tc.report, tc.err
				},
			}
			connect := func() (client.Client, error) { return nil, nil }
			err := dryRun(t.Context(), o, testPlan(), map[string]any{"email_id": "1"}, nil, connect)
			require.Equal(t, tc.wantCode, exitCode(err), "err: %v\n%s", err, out.String())
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
			}
			if tc.offline {
				require.Zero(t, calls, "--offline asks no worker")
			} else {
				require.Equal(t, 1, calls)
			}
			for _, l := range tc.wantLines {
				require.Contains(t, out.String(), l)
			}
			for _, l := range tc.absent {
				require.NotContains(t, out.String(), l)
			}
			if tc.output == "json" {
				var doc dryRunReport
				require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
				require.Equal(t, 1, doc.Preflight.Failed())
			}
			if tc.report != nil && tc.output != "json" {
				// The table comes before the check lines.
				require.Less(t, strings.Index(out.String(), "STEP"), strings.Index(out.String(), "preflight on worker"))
			}
		})
	}
}

// TestPreflightOnWorker drives the Temporal side against a mocked client:
// the workflow's ID, queue, timeout and input; a report; and, without one
// in time, the reason from the execution's pending work and a terminate,
// so nothing a dry run starts lingers.
func TestPreflightOnWorker(t *testing.T) {
	plan := &spec.Plan{Name: "demo", Version: "1.0.0", Steps: []spec.PlanStep{{ID: "fetch", Image: pfImage}}}
	tests := []struct {
		name      string
		get       func(ctx context.Context, v any) error
		describe  *workflowservice.DescribeWorkflowExecutionResponse
		wantCode  int
		wantMsg   string
		terminate bool
	}{
		{name: "report", get: func(_ context.Context, v any) error {
			*v.(*activities.PreflightReport) = *pfReport()
			return nil
		}, wantCode: ExitOK},
		{name: "no worker", get: waitForDeadline, describe: &workflowservice.DescribeWorkflowExecutionResponse{},
			wantCode: ExitFailure, wantMsg: "no worker answered on task queue q1 within 50ms", terminate: true},
		{name: "a worker without the workflow", get: waitForDeadline,
			describe: &workflowservice.DescribeWorkflowExecutionResponse{PendingWorkflowTask: &workflowpb.PendingWorkflowTaskInfo{Attempt: 4}},
			wantCode: ExitFailure, wantMsg: "workflow task attempt 4 failed", terminate: true},
		{name: "a worker took it and did not finish", get: waitForDeadline,
			describe: &workflowservice.DescribeWorkflowExecutionResponse{PendingActivities: []*workflowpb.PendingActivityInfo{
				{State: enumspb.PENDING_ACTIVITY_STATE_STARTED, LastWorkerIdentity: "slow@host"},
			}},
			wantCode: ExitFailure, wantMsg: "worker slow@host on task queue q1 took the preflight but did not finish it within 50ms", terminate: true},
		{name: "the workflow failed", get: func(context.Context, any) error { return errors.New("activity error") },
			wantCode: ExitFailure, wantMsg: "preflight on task queue q1: activity error", terminate: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &mocks.Client{}
			run := &mocks.WorkflowRun{}
			run.On("GetRunID").Return("run-1")
			run.On("Get", mock.Anything, mock.Anything).Return(func(ctx context.Context, v any) error { return tc.get(ctx, v) })
			c.On("ExecuteWorkflow", mock.Anything, mock.MatchedBy(func(o client.StartWorkflowOptions) bool {
				return strings.HasPrefix(o.ID, "preflight-agent-7-") && o.TaskQueue == "q1" &&
					o.WorkflowExecutionTimeout == 50*time.Millisecond+preflightGrace
			}), workflows.PreflightWorkflowName, workflows.PreflightInput{Plan: *plan, Timeout: 50 * time.Millisecond}).Return(run, nil)
			if tc.describe != nil {
				c.On("DescribeWorkflowExecution", mock.Anything, mock.Anything, "run-1").Return(tc.describe, nil)
			}
			if tc.terminate {
				c.On("TerminateWorkflow", mock.Anything, mock.Anything, "run-1", mock.Anything).Return(nil)
			}
			rep, err := preflightOnWorker(t.Context(), c, "q1", "agent-7", plan, 50*time.Millisecond)
			require.Equal(t, tc.wantCode, exitCode(err), "err: %v", err)
			if tc.wantMsg != "" {
				require.ErrorContains(t, err, tc.wantMsg)
			} else {
				require.NotNil(t, rep)
			}
			c.AssertExpectations(t)
		})
	}
}

// waitForDeadline is a run's Get that never answers: it returns when the
// caller's wait ends.
func waitForDeadline(ctx context.Context, _ any) error {
	<-ctx.Done()
	return ctx.Err()
}
