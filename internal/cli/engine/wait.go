package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/workflows"
)

// defaultPollInterval is how often --wait asks for the status: often
// enough to feel live, rare enough to cost the server nothing.
const defaultPollInterval = 500 * time.Millisecond

// waitConfig describes one --wait.
type waitConfig struct {
	AgentID  string
	RunID    string
	Order    []string // plan step order
	Interval time.Duration
	Out      io.Writer
	Err      io.Writer
	TTY      bool
	// Quiet suppresses the progress view (-o json prints only the result).
	Quiet bool
}

// waitForRun polls the status query until the run reaches a terminal
// status, rendering progress as it goes. A run that closes without a
// terminal status (terminated, timed out) ends the wait too.
func waitForRun(ctx context.Context, c client.Client, w waitConfig) (*workflows.Status, error) {
	interval := w.Interval
	if interval <= 0 {
		interval = defaultPollInterval
	}
	view := newProgressView(w.Out, w.TTY, w.AgentID, w.Order)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	warned := false
	for {
		st, err := queryStatus(ctx, c, w.AgentID, w.RunID)
		switch {
		case err == nil:
			if !w.Quiet {
				view.Update(st, time.Now())
			}
			if isTerminalRun(st.Status) {
				// The status turns terminal just before the workflow reports
				// the run (RunFinished) and closes. Wait for the close, so
				// the next command (resume, a run under the same name) sees
				// the agent closed. The run's own error is already in st.
				_ = c.GetWorkflow(ctx, w.AgentID, w.RunID).Get(ctx, nil)
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return st, nil
			}
		case ctx.Err() != nil:
			return nil, ctx.Err()
		default:
			// The query failed: the run may be closed without a final
			// status (terminated), or no worker is answering yet.
			sum, derr := describeAgent(ctx, c, w.AgentID, w.RunID)
			if derr == nil && sum.ExecutionStatus != "RUNNING" {
				return &workflows.Status{
					ID: sum.ID, RunID: sum.RunID, Status: sum.Status,
					StartedAt: sum.StartedAt, FinishedAt: sum.ClosedAt,
					Error: fmt.Sprintf("run closed as %s; status query failed: %v", sum.ExecutionStatus, err),
				}, nil
			}
			if !warned {
				fmt.Fprintf(w.Err, "agentctl: waiting for %s: status query failed (is a worker running?): %v\n", w.AgentID, err)
				warned = true
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ticker.C:
		}
	}
}

// finishWait prints the final result and maps the run status to the exit
// code: 0 on SUCCEEDED, 1 otherwise.
func finishWait(o *Options, st *workflows.Status) error {
	if o.Output == "json" {
		if err := writeJSON(o.Streams.Out, st); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(o.Streams.Out, "agent %s %s", st.ID, st.Status)
		if st.Progress != "" {
			fmt.Fprintf(o.Streams.Out, " (%s steps)", st.Progress)
		}
		fmt.Fprintln(o.Streams.Out)
		if len(st.Outputs) > 0 {
			fmt.Fprintln(o.Streams.Out, "outputs:")
			b, _ := json.MarshalIndent(st.Outputs, "  ", "  ")
			fmt.Fprintf(o.Streams.Out, "  %s\n", b)
		}
	}
	if st.Status == workflows.RunSucceeded {
		return nil
	}
	msg := fmt.Sprintf("agent %s ended %s", st.ID, st.Status)
	if st.Error != "" {
		msg += ": " + st.Error
	}
	return &ExitError{Code: ExitFailure, Err: errors.New(msg)}
}

// waitInterrupted explains how to pick a run up again after Ctrl-C.
func waitInterrupted(id string, err error) error {
	return &ExitError{Code: ExitFailure, Err: fmt.Errorf("stopped waiting for %s (%v); the agent keeps running: agentctl inspect %s", id, err, id)}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
