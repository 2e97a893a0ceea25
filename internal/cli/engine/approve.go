package engine

import (
	"context"
	"fmt"
	"os"
	"os/user"

	"github.com/spf13/cobra"

	"github.com/agentflow/agentflow/workflows"
)

type approveOptions struct {
	*Options
	ID      string
	Step    string
	Reject  bool
	Comment string
	By      string

	dial dialer
}

func newApproveCmd(g *Options) *cobra.Command {
	o := &approveOptions{Options: g, dial: dialerFor(g)}
	cmd := &cobra.Command{
		Use: "approve ID --step S [--reject] [--comment C]",
		Long: `Send the 'approval' signal for one approval step of a running agent. The
step succeeds on approve and fails on --reject (the comment is kept in its
record). A decision sent before the step is reached is kept until it waits.`,
		Example: `  agentctl approve complaint-42 --step review
  agentctl approve complaint-42 --step review --reject --comment "amount too high"`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ID = args[0]
			if o.Step == "" {
				return usageErr("approve: --step is required")
			}
			return runApprove(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Step, "step", "", "the approval step ID")
	f.BoolVar(&o.Reject, "reject", false, "reject instead of approve")
	f.StringVar(&o.Comment, "comment", "", "a comment recorded with the decision")
	f.StringVar(&o.By, "by", defaultApprover(), "who decides (default: $USER)")
	return cmd
}

func defaultApprover() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

func runApprove(ctx context.Context, o *approveOptions) error {
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
	// The plan is in the run's input: refuse unknown and non-approval
	// steps here, since the workflow would silently ignore the signal.
	in, err := runInput(ctx, c, o.ID, sum.RunID)
	if err != nil {
		return serverErr("read the plan of %s: %w", o.ID, err)
	}
	step, ok := in.Plan.Step(o.Step)
	if !ok {
		return usageErr("agent %s has no step %q", o.ID, o.Step)
	}
	if step.Approval == nil {
		return usageErr("step %q of %s is not an approval step", o.Step, o.ID)
	}
	d := workflows.ApprovalDecision{Step: o.Step, Approve: !o.Reject, Comment: o.Comment, By: o.By}
	if err := c.SignalWorkflow(ctx, o.ID, sum.RunID, workflows.ApprovalSignal, d); err != nil {
		if isNotFound(err) {
			return notFoundErr(o.ID)
		}
		return serverErr("signal %s: %w", o.ID, err)
	}
	verb := "approved"
	if o.Reject {
		verb = "rejected"
	}
	return report(o.Options, map[string]any{"id": o.ID, "run_id": sum.RunID, "step": o.Step, "approve": !o.Reject},
		fmt.Sprintf("step %s of %s %s", o.Step, o.ID, verb))
}
