package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentflow/agentflow/workflows"
)

type resumeOptions struct {
	*Options
	ID           string
	FromStep     string
	Wait         bool
	PollInterval time.Duration
	TaskQueue    string

	dial dialer
}

func newResumeCmd(g *Options) *cobra.Command {
	o := &resumeOptions{Options: g, dial: dialerFor(g)}
	cmd := &cobra.Command{
		Use: "resume ID [--from-step S] [--wait]",
		Long: `Start a new run under the same agent ID that re-runs step S and everything
downstream of it, and takes every other step's output, status and checkpoint
from the previous run (those steps show as carried). Without --from-step it
re-runs the failed and canceled steps and their descendants.

The new run uses exactly the previous run's plan and inputs (read from its
history), so tools resolve to the same images. A running agent is refused.`,
		Example: `  agentctl resume complaint-42
  agentctl resume daily-tech-news-1a2b3c4d --from-step summarize_news --wait`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ID = args[0]
			return runResume(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.FromStep, "from-step", "", "re-run this step and its descendants")
	f.BoolVar(&o.Wait, "wait", false, "wait for the new run, showing per-step progress")
	f.DurationVar(&o.PollInterval, "poll-interval", defaultPollInterval, "status poll interval for --wait")
	f.StringVar(&o.TaskQueue, "task-queue", workflows.TaskQueue, "task queue of the workers")
	_ = f.MarkHidden("poll-interval")
	return cmd
}

func runResume(ctx context.Context, o *resumeOptions) error {
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	sum, err := describeAgent(ctx, c, o.ID, "")
	if err != nil {
		return err
	}
	if sum.ExecutionStatus == "RUNNING" {
		return serverErr("agent %s is still running (run %s); cancel it or wait for it before resuming", o.ID, sum.RunID)
	}
	in, err := runInput(ctx, c, o.ID, sum.RunID)
	if err != nil {
		return serverErr("read the previous run's input: %w", err)
	}
	if o.FromStep != "" {
		if _, ok := in.Plan.Step(o.FromStep); !ok {
			return usageErr("agent %s has no step %q (steps: %s)", o.ID, o.FromStep, strings.Join(stepIDs(&in.Plan), ", "))
		}
	}
	prev, err := queryStatus(ctx, c, o.ID, sum.RunID)
	if err != nil {
		return serverErr("read the previous run's status (is a worker running?): %w", err)
	}
	carry, err := workflows.ResumeCarry(&in.Plan, prev, o.FromStep)
	if err != nil {
		return usageErr("%v", err)
	}
	if len(carry) == len(in.Plan.Steps) {
		return usageErr("nothing to resume: no step of %s failed or was canceled (use --from-step S to re-run from S)", o.ID)
	}
	tools := map[string]string{}
	for _, s := range in.Plan.Steps {
		if s.Tool != "" {
			tools[s.Tool] = s.Image
		}
	}
	runID, err := startAgent(ctx, c, o.TaskQueue, o.ID, workflows.Input{
		Plan: in.Plan, Inputs: in.Inputs, Carry: carry, ResumedFrom: sum.RunID,
	}, tools)
	if err != nil {
		return err
	}
	rerun := rerunSteps(stepIDs(&in.Plan), carry)
	if !o.Wait || o.Output != "json" {
		if o.Output == "json" {
			return writeJSON(o.Streams.Out, map[string]any{
				"id": o.ID, "run_id": runID, "resumed_from": sum.RunID, "rerun": rerun, "carried": sortedKeys(carry),
			})
		}
		fmt.Fprintf(o.Streams.Out, "agent:   %s\nrun:     %s (resumed from %s)\nre-run:  %s\n",
			o.ID, runID, sum.RunID, strings.Join(rerun, ", "))
		if !o.Wait {
			fmt.Fprintf(o.Streams.Out, "inspect: agentctl inspect %s\n", o.ID)
			return nil
		}
	}
	st, err := waitForRun(ctx, c, waitConfig{
		AgentID: o.ID, RunID: runID, Order: stepIDs(&in.Plan), Interval: o.PollInterval,
		Out: o.Streams.Out, Err: o.Streams.Err, TTY: o.Streams.IsTerminal, Quiet: o.Output == "json",
	})
	if err != nil {
		return waitInterrupted(o.ID, err)
	}
	return finishWait(o.Options, st)
}

// rerunSteps lists, in plan order, the steps that are not carried.
func rerunSteps(order []string, carry map[string]workflows.StepRecord) []string {
	var out []string
	for _, id := range order {
		if _, ok := carry[id]; !ok {
			out = append(out, id)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
