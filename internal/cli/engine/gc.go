package engine

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentflow/agentflow/internal/gc"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/worker"
)

// retentionFlag is a duration flag that also takes days ("30d"), the unit
// retention is thought in (spec.ParseDuration, the one duration syntax).
type retentionFlag struct{ d *time.Duration }

func (f retentionFlag) String() string {
	if f.d == nil {
		return ""
	}
	if *f.d%(24*time.Hour) == 0 && *f.d > 0 {
		return fmt.Sprintf("%dd", *f.d/(24*time.Hour))
	}
	return f.d.String()
}

func (f retentionFlag) Set(s string) error {
	d, err := spec.ParseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return fmt.Errorf("%q is negative", s)
	}
	*f.d = d
	return nil
}

func (retentionFlag) Type() string { return "duration" }

type gcOptions struct {
	*Options
	OlderThan     time.Duration
	DryRun        bool
	Store         string
	CheckpointDir string
	LogDir        string
	ResultDir     string

	dial dialer
}

func newGCCmd(g *Options) *cobra.Command {
	o := &gcOptions{Options: g, dial: dialerFor(g), OlderThan: worker.DefaultGCOlderThan}
	cmd := &cobra.Command{
		Use: "gc [--older-than 30d] [--dry-run]",
		Long: `Delete the checkpoints, step logs and attempt records of runs that closed
longer than --older-than ago, as Temporal's visibility reports them, and
print the objects and bytes freed (with --dry-run: what would be freed,
nothing deleted).

Never deleted: anything of a run that is open, closed within --older-than,
or the latest run of a schedule; checkpoints that such a run carries from an
earlier run (a resumed run restores them); objects gc cannot attribute to a
run Temporal knows (other keys, runs past the namespace's retention). A run
past --older-than can no longer be resumed. Point it at the stores the
workers use: --store, else the local directories.`,
		Example: `  agentctl gc --dry-run
  agentctl gc --older-than 7d -o json
  AWS_ENDPOINT_URL=http://minio.internal:9000 agentctl gc --store s3://agentflow/prod --older-than 90d`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return runGC(cmd.Context(), o) },
	}
	f := cmd.Flags()
	f.Var(retentionFlag{&o.OlderThan}, "older-than", `delete what runs closed longer ago than this left behind (Go duration or days, e.g. 30d; 0s: every closed run)`)
	f.BoolVar(&o.DryRun, "dry-run", false, "report what would be deleted, delete nothing")
	f.StringVar(&o.Store, "store", os.Getenv("AGENTFLOW_STORE"), "the workers' shared object store (s3://BUCKET[/PREFIX] or file:///DIR; env AGENTFLOW_STORE); default: the local directories below")
	f.StringVar(&o.CheckpointDir, "checkpoint-dir", worker.DefaultCheckpointDir, "local checkpoint directory (without --store)")
	f.StringVar(&o.LogDir, "log-dir", envOr("AGENTFLOW_LOG_DIR", worker.DefaultLogDir), "local step log directory (without --store; env AGENTFLOW_LOG_DIR)")
	f.StringVar(&o.ResultDir, "result-dir", "", `local attempt result directory (without --store; default: "results" next to --checkpoint-dir)`)
	return cmd
}

func runGC(ctx context.Context, o *gcOptions) error {
	if o.ResultDir == "" {
		o.ResultDir = worker.ResultDirFor(o.CheckpointDir)
	}
	if o.Store == "" {
		// Opening a Dir creates it; gc on a machine without a worker's
		// state would only make empty directories.
		for _, d := range []string{o.CheckpointDir, o.LogDir, o.ResultDir} {
			if _, err := os.Stat(d); err != nil {
				return usageErr("no state directory %s (run gc where the worker keeps its state, or with --store): %v", d, err)
			}
		}
	}
	stores, err := worker.OpenStores(ctx, o.Store, o.CheckpointDir, o.LogDir, o.ResultDir)
	if err != nil {
		return usageErr("%v", err)
	}
	defer stores.Close()
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	runs := &gc.Temporal{Client: c, Namespace: o.Namespace, Converter: payloadConverter(c)}
	if ret, err := runs.Retention(ctx); err == nil && ret > 0 && o.OlderThan >= ret {
		fmt.Fprintf(o.Streams.Err, "warning: --older-than %s is not shorter than the namespace's retention (%s): runs Temporal forgets first keep their objects\n", o.OlderThan, ret)
	}
	rep, err := gc.Collect(ctx, runs, gc.Stores{Checkpoints: stores.Checkpoints, Logs: stores.Logs, Results: stores.Results},
		gc.Options{OlderThan: o.OlderThan, DryRun: o.DryRun})
	if err != nil && rep.Failed == 0 {
		return serverErr("gc: %w", err) // nothing deleted: the answer was incomplete
	}
	if o.Output == "json" {
		if werr := writeJSON(o.Streams.Out, rep); werr != nil {
			return werr
		}
	} else {
		verb := "freed"
		if rep.DryRun {
			verb = "would free"
		}
		fmt.Fprintf(o.Streams.Out, "runs past retention (closed before %s): %d (kept: %d)\n", rep.Cutoff.Format(time.RFC3339), rep.RunsExpired, rep.RunsKept)
		fmt.Fprintf(o.Streams.Out, "%s %d objects, %d bytes: %d checkpoints, %d log objects, %d attempt records\n",
			verb, rep.Objects, rep.Bytes, rep.Checkpoints, rep.LogObjects, rep.Records)
		fmt.Fprintf(o.Streams.Out, "kept: %d checkpoints carried by resumed runs; left: %d checkpoints of kept or unknown runs\n",
			rep.KeptByResume, rep.CheckpointsLeft)
	}
	if err != nil {
		return serverErr("gc: %w", err)
	}
	return nil
}
