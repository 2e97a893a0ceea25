package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentflow/agentflow/internal/logstore"
)

type logsOptions struct {
	*Options
	ID       string
	Step     string
	RunID    string
	Tail     int
	Follow   bool
	Attempt  int32
	LogDir   string
	Interval time.Duration

	dial dialer
}

func newLogsCmd(g *Options) *cobra.Command {
	o := &logsOptions{Options: g, dial: dialerFor(g)}
	cmd := &cobra.Command{
		Use: "logs ID --step S [--tail N] [-f] [--attempt K]",
		Long: `Print the tool stderr (and stdout of failed attempts) of one step, per
attempt, from the log store the worker writes (a local directory by default:
<log-dir>/<agent>/<run>/<step>/<attempt>.log, so run this where the worker
runs). Without --run-id the latest run that logged the step is shown (with
-f, the agent's latest run). -f keeps printing new attempts until the run
has closed.`,
		Example: `  agentctl logs daily-tech-news-1a2b3c4d --step summarize_news
  agentctl logs complaint-42 --step fetch_email --attempt 2 --tail 20
  agentctl logs complaint-42 --step fetch_email -f`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ID = args[0]
			if o.Step == "" {
				return usageErr("logs: --step is required")
			}
			if o.Tail < 0 || o.Attempt < 0 {
				return usageErr("logs: --tail and --attempt must not be negative")
			}
			return runLogs(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Step, "step", "", "step ID")
	f.StringVar(&o.RunID, "run-id", "", "a specific run (default: the latest that logged the step)")
	f.IntVar(&o.Tail, "tail", 0, "only the last N lines of each attempt (0 = all)")
	f.BoolVarP(&o.Follow, "follow", "f", false, "keep printing new attempts until the run has closed")
	f.Int32Var(&o.Attempt, "attempt", 0, "only attempt K (default: every attempt)")
	f.StringVar(&o.LogDir, "log-dir", envOr("AGENTFLOW_LOG_DIR", logstore.DefaultDir), "log store directory (env AGENTFLOW_LOG_DIR)")
	f.DurationVar(&o.Interval, "poll-interval", time.Second, "poll interval for -f")
	_ = f.MarkHidden("poll-interval")
	return cmd
}

// logDoc is one attempt in -o json.
type logDoc struct {
	RunID   string `json:"run_id"`
	Step    string `json:"step"`
	Attempt int32  `json:"attempt"`
	Log     string `json:"log"`
}

func runLogs(ctx context.Context, o *logsOptions) error {
	store := logstore.NewDir(o.LogDir)
	if !o.Follow {
		docs, err := readLogs(ctx, store, o, o.RunID, nil)
		if err != nil {
			return err
		}
		if len(docs) == 0 {
			return noLogs(o)
		}
		return printLogs(o, docs)
	}

	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	sum, err := describeAgent(ctx, c, o.ID, o.RunID)
	if err != nil {
		return err
	}
	printed := map[logstore.Key]bool{}
	ticker := time.NewTicker(o.Interval)
	defer ticker.Stop()
	var all []logDoc
	for {
		// Read the closure state before the logs, so the last attempt's log
		// (written before its activity completes) is not missed.
		closed := sum.ExecutionStatus != "RUNNING"
		docs, err := readLogs(ctx, store, o, sum.RunID, printed)
		if err != nil {
			return err
		}
		if o.Output == "json" {
			all = append(all, docs...)
		} else if err := printLogs(o, docs); err != nil {
			return err
		}
		if closed {
			break
		}
		select {
		case <-ctx.Done():
			return nil // Ctrl-C ends following; not an error
		case <-ticker.C:
		}
		if sum, err = describeAgent(ctx, c, o.ID, sum.RunID); err != nil {
			return err
		}
	}
	if o.Output == "json" {
		if all == nil {
			all = []logDoc{}
		}
		return writeJSON(o.Streams.Out, all)
	}
	return nil
}

// readLogs returns the matching attempts not yet in printed (nil = all),
// marking them printed.
func readLogs(ctx context.Context, store *logstore.Dir, o *logsOptions, runID string, printed map[logstore.Key]bool) ([]logDoc, error) {
	entries, err := store.List(ctx, o.ID)
	if err != nil {
		return nil, &ExitError{Code: ExitFailure, Err: err}
	}
	var docs []logDoc
	for _, e := range logstore.Find(entries, runID, o.Step, o.Attempt) {
		if printed != nil {
			if printed[e.Key] {
				continue
			}
			printed[e.Key] = true
		}
		data, err := store.Read(ctx, e.Key, 0)
		if err != nil {
			return nil, &ExitError{Code: ExitFailure, Err: err}
		}
		docs = append(docs, logDoc{RunID: e.Key.RunID, Step: e.Key.StepID, Attempt: e.Key.Attempt, Log: string(tailLines(data, o.Tail))})
	}
	return docs, nil
}

func printLogs(o *logsOptions, docs []logDoc) error {
	if o.Output == "json" {
		if docs == nil {
			docs = []logDoc{}
		}
		return writeJSON(o.Streams.Out, docs)
	}
	headers := len(docs) > 1 || o.Follow
	for _, d := range docs {
		if headers {
			fmt.Fprintf(o.Streams.Out, "==> %s attempt %d (run %s) <==\n", d.Step, d.Attempt, d.RunID)
		}
		fmt.Fprint(o.Streams.Out, d.Log)
		if d.Log != "" && d.Log[len(d.Log)-1] != '\n' {
			fmt.Fprintln(o.Streams.Out)
		}
	}
	return nil
}

func noLogs(o *logsOptions) error {
	what := fmt.Sprintf("step %s", o.Step)
	if o.Attempt > 0 {
		what += fmt.Sprintf(" attempt %d", o.Attempt)
	}
	if o.RunID != "" {
		what += " of run " + o.RunID
	}
	return &ExitError{Code: ExitFailure, Err: fmt.Errorf("no logs for %s of agent %s in %s (logs live where the worker runs; see --log-dir)", what, o.ID, o.LogDir)}
}

// tailLines keeps the last n lines of data (n <= 0: all).
func tailLines(data []byte, n int) []byte {
	if n <= 0 {
		return data
	}
	end := len(data)
	if end > 0 && data[end-1] == '\n' {
		end--
	}
	i := end
	for count := 0; i > 0; i-- {
		if data[i-1] == '\n' {
			count++
			if count == n {
				break
			}
		}
	}
	return data[i:]
}
