package engine

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

type cancelOptions struct {
	*Options
	ID   string
	Wait bool

	dial dialer
}

func newCancelCmd(g *Options) *cobra.Command {
	o := &cancelOptions{Options: g, dial: dialerFor(g)}
	cmd := &cobra.Command{
		Use: "cancel ID [--wait]",
		Long: `Request cancellation of the agent's latest run. Running tools get SIGTERM and
their sandboxes are destroyed after a grace period; the steps and the run end
canceled / CANCELED. With --wait, return once the run has closed.`,
		Example: `  agentctl cancel daily-tech-news-1a2b3c4d
  agentctl cancel complaint-42 --wait`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ID = args[0]
			return runCancel(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.Wait, "wait", false, "wait until the run has closed")
	return cmd
}

func runCancel(ctx context.Context, o *cancelOptions) error {
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	sum, err := describeAgent(ctx, c, o.ID, "")
	if err != nil {
		return err
	}
	if sum.ExecutionStatus != "RUNNING" {
		return serverErr("agent %s is not running (its latest run ended %s)", o.ID, sum.Status)
	}
	if err := c.CancelWorkflow(ctx, o.ID, sum.RunID); err != nil {
		if isNotFound(err) {
			return notFoundErr(o.ID)
		}
		return serverErr("cancel %s: %w", o.ID, err)
	}
	if !o.Wait {
		return report(o.Options, map[string]any{"id": o.ID, "run_id": sum.RunID, "cancel_requested": true},
			fmt.Sprintf("cancel requested for %s (run %s)", o.ID, sum.RunID))
	}
	// The run's own error is expected (canceled); only closure matters.
	_ = c.GetWorkflow(ctx, o.ID, sum.RunID).Get(ctx, nil)
	if ctx.Err() != nil {
		return waitInterrupted(o.ID, ctx.Err())
	}
	after, err := describeAgent(ctx, c, o.ID, sum.RunID)
	if err != nil {
		return err
	}
	return report(o.Options, map[string]any{"id": o.ID, "run_id": sum.RunID, "status": after.Status},
		fmt.Sprintf("agent %s %s", o.ID, after.Status))
}

// report prints v as JSON with -o json, else the line.
func report(o *Options, v any, line string) error {
	if o.Output == "json" {
		return writeJSON(o.Streams.Out, v)
	}
	_, err := fmt.Fprintln(o.Streams.Out, line)
	return err
}
