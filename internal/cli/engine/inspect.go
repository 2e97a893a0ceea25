package engine

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agentflow/agentflow/workflows"
)

type inspectOptions struct {
	*Options
	ID    string
	RunID string
	// Table is set only by an explicit -o table: inspect prints JSON by
	// default although the global default output is table.
	Table bool

	dial dialer
}

func newInspectCmd(g *Options) *cobra.Command {
	o := &inspectOptions{Options: g, dial: dialerFor(g)}
	cmd := &cobra.Command{
		Use: "inspect ID [--run-id R]",
		Long: `Print the inspect document of an agent run: id, run_id, name, version,
status, current_step, progress, started_at, finished_at, step_history,
context and outputs. It comes from the run's 'status' query, which works on
closed runs too (a worker replays them). When no worker answers, inspect
falls back to what Temporal's visibility knows and says so.

The output is always JSON; -o table prints a compact summary and step table.`,
		Example: `  agentctl inspect daily-tech-news-1a2b3c4d
  agentctl inspect complaint-42 --run-id 0194c7e2-...
  agentctl inspect complaint-42 -o table`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ID = args[0]
			o.Table = cmd.Flags().Changed("output") && o.Output == "table"
			return runInspect(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.RunID, "run-id", "", "a specific run (default: the latest)")
	return cmd
}

// inspectFallback is printed when the status query cannot be answered.
type inspectFallback struct {
	agentSummary
	Note string `json:"note"`
}

func runInspect(ctx context.Context, o *inspectOptions) error {
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	// Describe first: it distinguishes an unknown agent (exit 1, clear
	// message) from a query that no worker answers.
	sum, err := describeAgent(ctx, c, o.ID, o.RunID)
	if err != nil {
		return err
	}
	st, qerr := queryStatus(ctx, c, o.ID, sum.RunID)
	if qerr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fb := inspectFallback{agentSummary: sum,
			Note: fmt.Sprintf("status query failed (is a worker running?): %v; showing what Temporal visibility knows", qerr)}
		fmt.Fprintln(o.Streams.Err, "agentctl: "+fb.Note)
		if o.Table {
			printSummaryTable(o, sum)
			return nil
		}
		return writeJSON(o.Streams.Out, fb)
	}
	markGPUWaits(ctx, c, o.Namespace, st)
	if o.Table {
		printStatusTable(o, st)
		return nil
	}
	return writeJSON(o.Streams.Out, st)
}

func printSummaryTable(o *inspectOptions, s agentSummary) {
	tw := tabwriter.NewWriter(o.Streams.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\t%s\nRUN\t%s\nSPEC\t%s %s\nSTATUS\t%s\nSTARTED\t%s\nCLOSED\t%s\n",
		s.ID, s.RunID, s.Spec, s.SpecVersion, s.Status, fmtTime(s.StartedAt), fmtTime(s.ClosedAt))
	tw.Flush()
}

func printStatusTable(o *inspectOptions, st *workflows.Status) {
	tw := tabwriter.NewWriter(o.Streams.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\t%s\nRUN\t%s\nSPEC\t%s %s\nSTATUS\t%s\nPROGRESS\t%s\nSTARTED\t%s\nFINISHED\t%s\n",
		st.ID, st.RunID, st.Name, st.Version, st.Status, st.Progress, fmtTime(st.StartedAt), fmtTime(st.FinishedAt))
	if st.ResumedFrom != "" {
		fmt.Fprintf(tw, "RESUMED FROM\t%s\n", st.ResumedFrom)
	}
	if st.Error != "" {
		fmt.Fprintf(tw, "ERROR\t%s\n", oneLine(st.Error, 200))
	}
	tw.Flush()
	fmt.Fprintln(o.Streams.Out)
	tw = tabwriter.NewWriter(o.Streams.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tSTATUS\tATTEMPTS\tDURATION\tCHECKPOINT\tNOTE")
	for _, r := range st.StepHistory {
		note := r.Reason
		if r.Carried {
			note = "carried " + note
		}
		if r.Error != "" {
			note += " " + oneLine(r.Error, 80)
		}
		dur := ""
		if r.DurationMS > 0 {
			dur = formatMS(r.DurationMS)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Status, r.Attempts, dur, r.CheckpointID, note)
	}
	tw.Flush()
	printAttempts(o.Streams.Out, st.StepHistory)
	printEgress(o.Streams.Out, st.StepHistory)
	if len(st.Outputs) > 0 {
		fmt.Fprintln(o.Streams.Out, "\noutputs:")
		_ = writeJSON(o.Streams.Out, st.Outputs)
	}
}

// printEgress lists what each step with egress may reach (hosts and the
// names of the headers the proxy adds).
func printEgress(w io.Writer, steps []workflows.StepRecord) {
	header := false
	for _, r := range steps {
		if len(r.Egress) == 0 {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\negress:")
			header = true
		}
		fmt.Fprintf(w, "  %s: %s\n", r.ID, strings.Join(r.Egress, ", "))
	}
}

// printAttempts adds one line per step whose attempts say more than its
// row does: more than one attempt, or an infrastructure failure. The full
// records (errors, times) are in the JSON document's attempt_history.
func printAttempts(w io.Writer, steps []workflows.StepRecord) {
	header := false
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range steps {
		line, ok := attemptsLine(r.AttemptHistory)
		if !ok {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nattempts:")
			header = true
		}
		fmt.Fprintf(tw, "  %s\t%s\n", r.ID, line)
	}
	tw.Flush()
}

// attemptsLine is a step's attempts, compactly: "#1 SandboxLost
// (infrastructure, w-a) · #2 success (w-b, adopted #1)". ok is false when
// there is nothing worth a line.
func attemptsLine(hist []workflows.AttemptRecord) (line string, ok bool) {
	show := len(hist) > 1
	parts := make([]string, 0, len(hist))
	for _, a := range hist {
		what, notes := a.Status, []string(nil)
		if a.Status == workflows.AttemptFailed {
			what = a.Type
			notes = append(notes, a.Class)
			show = show || a.Class == workflows.ClassInfrastructure
		}
		if a.Worker != "" {
			notes = append(notes, a.Worker)
		}
		if a.AdoptedFrom > 0 {
			notes = append(notes, fmt.Sprintf("adopted #%d", a.AdoptedFrom))
		}
		part := fmt.Sprintf("#%d %s", a.Attempt, what)
		if len(notes) > 0 {
			part += " (" + strings.Join(notes, ", ") + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, " · "), show
}
