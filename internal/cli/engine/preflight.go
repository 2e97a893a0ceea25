package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/workflows"
)

// run --dry-run asks a worker of the run's task queue to check what the
// steps need there (PreflightWorkflow → one Preflight activity).

// preflightGrace is how much longer than the CLI's own wait the server
// lets a preflight live: the CLI gives up first, looks at why and
// terminates it; without the CLI the server ends it shortly after.
const preflightGrace = 10 * time.Second

// preflightFunc runs the preflight of plan on a worker of queue. Tests
// replace it.
type preflightFunc func(ctx context.Context, c client.Client, queue, agent string, plan *spec.Plan, timeout time.Duration) (*activities.PreflightReport, error)

// preflightOnWorker starts PreflightWorkflow as preflight-<agent>-<random>
// and waits up to timeout for its report. Without an answer it
// terminates the workflow and returns exit 1 saying why: no worker took
// it, or one took it and did not finish.
func preflightOnWorker(ctx context.Context, c client.Client, queue, agent string, plan *spec.Plan, timeout time.Duration) (*activities.PreflightReport, error) {
	if queue == "" {
		queue = workflows.TaskQueue
	}
	id := "preflight-" + agent + "-" + randomHex(4)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        id,
		TaskQueue: queue,
		// The server ends it even when this process is gone.
		WorkflowExecutionTimeout: timeout + preflightGrace,
		StaticSummary:            fmt.Sprintf("dry run of %s %s", plan.Name, plan.Version),
	}, workflows.PreflightWorkflowName, workflows.PreflightInput{Plan: *plan, Timeout: timeout})
	if err != nil {
		return nil, serverErr("start preflight on task queue %s: %w", queue, err)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rep activities.PreflightReport
	err = run.Get(wctx, &rep)
	if err == nil {
		return &rep, nil
	}
	var te *temporal.TimeoutError
	timedOut := wctx.Err() != nil && ctx.Err() == nil || errors.As(err, &te)
	why := ""
	if timedOut {
		why = noAnswerReason(ctx, c, id, run.GetRunID(), queue, timeout)
	}
	terminatePreflight(c, id, run.GetRunID())
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case timedOut:
		return nil, &ExitError{Code: ExitFailure, Err: errors.New(why)}
	default:
		return nil, serverErr("preflight on task queue %s: %w", queue, err)
	}
}

// noAnswerReason says why a preflight did not report in time, from the
// execution's pending work: nobody took it, a worker failed its workflow
// task (one without PreflightWorkflow: older than this agentctl), or a
// worker took the activity and did not finish.
func noAnswerReason(ctx context.Context, c client.Client, id, runID, queue string, timeout time.Duration) string {
	none := fmt.Sprintf("no worker answered on task queue %s within %s (is `agentctl worker --task-queue %s` running?)", queue, timeout, queue)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	d, err := c.DescribeWorkflowExecution(dctx, id, runID)
	if err != nil {
		return none
	}
	if wt := d.GetPendingWorkflowTask(); wt != nil && wt.GetAttempt() > 1 {
		return fmt.Sprintf("a worker on task queue %s could not run the preflight within %s (workflow task attempt %d failed: a worker older than this agentctl, without %s?)",
			queue, timeout, wt.GetAttempt(), workflows.PreflightWorkflowName)
	}
	for _, a := range d.GetPendingActivities() {
		if a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
			return fmt.Sprintf("worker %s on task queue %s took the preflight but did not finish it within %s",
				a.GetLastWorkerIdentity(), queue, timeout)
		}
	}
	return none
}

// terminatePreflight ends a preflight that is still open, whatever the
// caller's context: nothing a dry run starts may linger.
func terminatePreflight(c client.Client, id, runID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Best effort: an execution that already closed answers NotFound, and
	// the execution timeout ends one this call could not reach.
	_ = c.TerminateWorkflow(ctx, id, runID, "agentctl run --dry-run: no report in time")
}

// printPreflight writes one line per check: status, kind, step, target,
// and the reason of a failed or skipped check.
func printPreflight(w io.Writer, queue string, rep *activities.PreflightReport) {
	fmt.Fprintf(w, "preflight on worker %s (task queue %s):\n", rep.Worker, queue)
	if len(rep.Checks) == 0 {
		fmt.Fprintln(w, "  nothing to check (no tool steps)")
	}
	for _, c := range rep.Checks {
		line := fmt.Sprintf("%-4s %-6s step %s  %s", c.Status, c.Kind, c.Step, c.Target)
		if c.Status != activities.CheckOK && c.Reason != "" {
			line += ": " + c.Reason
		}
		fmt.Fprintln(w, line)
	}
}
