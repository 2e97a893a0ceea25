package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
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
	Store    string
	Interval time.Duration

	dial dialer
	// open opens the log store the flags name (tests swap it).
	open func(ctx context.Context, o *logsOptions) (*logstore.Store, func(), error)
}

func newLogsCmd(g *Options) *cobra.Command {
	o := &logsOptions{Options: g, dial: dialerFor(g), open: openLogStore}
	cmd := &cobra.Command{
		Use: "logs ID --step S [--tail N] [-f] [--attempt K]",
		Long: `Print the tool stderr (and stdout of failed attempts) of one step, per
attempt, from the log store the workers write: the object store of
--store (env AGENTFLOW_STORE, e.g. s3://bucket/prefix, shared by every
worker; S3 endpoint and credentials from the AWS_* variables) or, without
it, the local directory --log-dir (run this where the worker runs).
Without --run-id the latest run that logged the step is shown (with -f,
the agent's latest run). -f prints a running attempt's lines as the
worker stores them (every few seconds), moves on to the next attempt, and
ends when the run has closed.`,
		Example: `  agentctl logs daily-tech-news-1a2b3c4d --step summarize_news
  agentctl logs complaint-42 --step fetch_email --attempt 2 --tail 20
  agentctl logs complaint-42 --step fetch_email -f --store s3://agentflow/prod`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ID = args[0]
			if o.Step == "" {
				return usageErr("logs: --step is required")
			}
			if o.Tail < 0 || o.Attempt < 0 {
				return usageErr("logs: --tail and --attempt must not be negative")
			}
			f := cmd.Flags()
			switch {
			case f.Changed("store") && f.Changed("log-dir"):
				return usageErr("logs: --store and --log-dir name two different log stores; give one")
			case f.Changed("log-dir"):
				o.Store = "" // an explicit directory wins over AGENTFLOW_STORE
			}
			return runLogs(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Step, "step", "", "step ID")
	f.StringVar(&o.RunID, "run-id", "", "a specific run (default: the latest that logged the step)")
	f.IntVar(&o.Tail, "tail", 0, "only the last N lines of each attempt (0 = all)")
	f.BoolVarP(&o.Follow, "follow", "f", false, "print new lines and attempts until the run has closed")
	f.Int32Var(&o.Attempt, "attempt", 0, "only attempt K (default: every attempt)")
	f.StringVar(&o.Store, "store", os.Getenv("AGENTFLOW_STORE"), "object store the workers write (s3://BUCKET[/PREFIX]; env AGENTFLOW_STORE); logs are under its logs/ prefix")
	f.StringVar(&o.LogDir, "log-dir", envOr("AGENTFLOW_LOG_DIR", logstore.DefaultDir), "log store directory when there is no --store (env AGENTFLOW_LOG_DIR)")
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
	// Finished: the attempt's log is complete (false: still running, or
	// its worker was lost before it ended the log).
	Finished bool `json:"finished"`
}

func runLogs(ctx context.Context, o *logsOptions) error {
	store, closeStore, err := o.open(ctx, o)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	defer closeStore()
	if !o.Follow {
		docs, err := readLogs(ctx, store, o)
		if err != nil {
			return err
		}
		if len(docs) == 0 {
			return noLogs(o, store)
		}
		return printLogs(o, docs)
	}

	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	state := func(ctx context.Context, runID string) (runState, error) {
		sum, err := describeAgent(ctx, c, o.ID, runID)
		return runState{RunID: sum.RunID, Closed: sum.ExecutionStatus != "RUNNING"}, err
	}
	return followLogs(ctx, o, store, state)
}

// runState is what -f needs to know of the run: which one, and whether it
// has closed (then no attempt starts any more).
type runState struct {
	RunID  string
	Closed bool
}

// followLogs prints every attempt of the step in the run, following each
// one's chunks until its end marker, until the run has closed. An attempt
// whose log never ends (its worker died) is left once a later attempt
// starts or the run closes.
func followLogs(ctx context.Context, o *logsOptions, store *logstore.Store, state func(context.Context, string) (runState, error)) error {
	st, err := state(ctx, o.RunID)
	if err != nil {
		return err
	}
	runID := st.RunID
	done := map[logstore.Key]bool{}
	var all []logDoc
	ticker := time.NewTicker(o.Interval)
	defer ticker.Stop()
	for {
		// Read the closure state before the logs, so the last attempt's
		// log (ended before its activity completes) is not missed.
		closed := st.Closed
		entries, err := store.ListStep(ctx, o.ID, runID, o.Step)
		if err != nil {
			return &ExitError{Code: ExitFailure, Err: err}
		}
		for _, e := range logstore.Find(entries, runID, o.Step, o.Attempt) {
			if done[e.Key] {
				continue
			}
			doc, err := followAttempt(ctx, o, store, e.Key, runID, state)
			if err != nil && ctx.Err() != nil {
				return nil // Ctrl-C ends following; not an error
			}
			if err != nil {
				return &ExitError{Code: ExitFailure, Err: err}
			}
			done[e.Key] = true
			all = append(all, doc)
		}
		if closed {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		if st, err = state(ctx, runID); err != nil {
			if ctx.Err() != nil {
				return nil
			}
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

// followAttempt prints one attempt as it is stored (to a buffer for -o
// json) and returns it.
func followAttempt(ctx context.Context, o *logsOptions, store *logstore.Store, key logstore.Key, runID string,
	state func(context.Context, string) (runState, error)) (logDoc, error) {
	doc := logDoc{RunID: key.RunID, Step: key.StepID, Attempt: key.Attempt}
	var buf bytes.Buffer
	out := &lastByte{w: &buf}
	if o.Output != "json" {
		fmt.Fprintf(o.Streams.Out, "==> %s attempt %d (run %s) <==\n", key.StepID, key.Attempt, key.RunID)
		out.w = o.Streams.Out
	}
	stop := func(ctx context.Context) (bool, error) {
		st, err := state(ctx, runID)
		if err != nil || st.Closed {
			return st.Closed, err
		}
		entries, err := store.ListStep(ctx, o.ID, runID, o.Step)
		if err != nil {
			return false, err
		}
		for _, e := range entries {
			if e.Key.Attempt > key.Attempt {
				return true, nil // a later attempt started: this one is over
			}
		}
		return false, nil
	}
	err := store.Follow(ctx, key, out, logstore.FollowOptions{Poll: o.Interval, Stop: stop, TailLines: o.Tail})
	switch {
	case err == nil:
		doc.Finished = true
	case errors.Is(err, logstore.ErrStopped):
		if out.n > 0 && out.last != '\n' {
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "[agentflow: attempt %d's log has no end: its worker stopped before ending it]\n", key.Attempt)
	default:
		return doc, err
	}
	if o.Output != "json" && out.n > 0 && out.last != '\n' {
		fmt.Fprintln(out)
	}
	doc.Log = buf.String()
	return doc, nil
}

// lastByte passes writes on and remembers the last byte written.
type lastByte struct {
	w    io.Writer
	n    int64
	last byte
}

func (l *lastByte) Write(p []byte) (int, error) {
	if len(p) > 0 {
		l.n += int64(len(p))
		l.last = p[len(p)-1]
	}
	return l.w.Write(p)
}

// readLogs returns the matching attempts as stored now.
func readLogs(ctx context.Context, store *logstore.Store, o *logsOptions) ([]logDoc, error) {
	entries, err := store.List(ctx, o.ID)
	if err != nil {
		return nil, &ExitError{Code: ExitFailure, Err: err}
	}
	var docs []logDoc
	for _, e := range logstore.Find(entries, o.RunID, o.Step, o.Attempt) {
		data, err := store.Read(ctx, e.Key, 0)
		if err != nil {
			return nil, &ExitError{Code: ExitFailure, Err: err}
		}
		docs = append(docs, logDoc{RunID: e.Key.RunID, Step: e.Key.StepID, Attempt: e.Key.Attempt,
			Log: string(logstore.TailLines(data, o.Tail)), Finished: e.Finished})
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
	headers := len(docs) > 1
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

func noLogs(o *logsOptions, store *logstore.Store) error {
	what := fmt.Sprintf("step %s", o.Step)
	if o.Attempt > 0 {
		what += fmt.Sprintf(" attempt %d", o.Attempt)
	}
	if o.RunID != "" {
		what += " of run " + o.RunID
	}
	hint := "logs are in the store the workers write; see --store and --log-dir"
	return &ExitError{Code: ExitFailure, Err: fmt.Errorf("no logs for %s of agent %s in %s (%s)", what, o.ID, store, hint)}
}
