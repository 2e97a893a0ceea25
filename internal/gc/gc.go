// Package gc is agentflow's retention: it deletes the checkpoints, step
// logs and attempt records of runs that closed longer ago than a cut-off,
// and nothing that a run which is not past retention still needs
// (`agentctl gc`, `worker --gc-every`; DECISIONS 207–213).
//
// What belongs to which run:
//   - logs and attempt records are keyed <agent>/<run>/… (logstore,
//     attemptrec): a run's prefix is its own;
//   - a checkpoint (<id>.json manifest + <id>.tar content, flat keys) is
//     attributed through its manifest's execution_id, which is
//     activities.ExecutionIDFor(agent, run, step, attempt): gc derives
//     every execution ID a run's attempts could have had from the run's
//     plan (its first history event) and workflows.MaxAttempts.
//
// A run is expired when Temporal says it is closed and its close time is at
// or before the cut-off, and it is not the latest run of a schedule. The
// checkpoints an unexpired run restores from other runs (Input.Carry of a
// resumed run) are kept whoever produced them. Everything else (objects of
// runs Temporal does not know, keys of other shapes, manifests that do not
// decode) is left alone and reported.
package gc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/workflows"
)

// RunKey names one run.
type RunKey struct {
	AgentID string `json:"agent_id"`
	RunID   string `json:"run_id"`
}

// Run is one AgentWorkflow run as Temporal's visibility lists it.
type Run struct {
	RunKey
	Open      bool
	CloseTime time.Time // zero while open
}

// Runs is what gc asks Temporal (the temporal.go implementation; a fake in
// tests). Every method returns all results or an error: gc never deletes
// on a partial answer.
type Runs interface {
	// List returns every AgentWorkflow run the namespace knows, open and
	// closed. With since set, only runs started at or after it.
	List(ctx context.Context, since time.Time) ([]Run, error)
	// Input is a run's workflow input (its plan and carried steps).
	Input(ctx context.Context, run RunKey) (*workflows.Input, error)
	// ScheduleLatest returns the most recent run started by each schedule.
	ScheduleLatest(ctx context.Context) ([]RunKey, error)
}

// Stores are the worker's state stores (worker.Stores).
type Stores struct {
	Checkpoints objstore.Store // <id>.json, <id>.tar
	Logs        objstore.Store // <agent>/<run>/…
	Results     objstore.Store // <agent>/<run>/…
}

// Options configure a collection.
type Options struct {
	// OlderThan: runs closed longer ago than this are expired (0: every
	// closed run).
	OlderThan time.Duration
	DryRun    bool
	Now       func() time.Time // nil: time.Now
	Logger    *slog.Logger
}

// Report says what a collection freed (or, with DryRun, would free).
type Report struct {
	DryRun       bool      `json:"dry_run"`
	Cutoff       time.Time `json:"cutoff"`
	RunsExpired  int       `json:"runs_expired"`
	RunsKept     int       `json:"runs_kept"`
	Objects      int       `json:"objects"`
	Bytes        int64     `json:"bytes"`
	Checkpoints  int       `json:"checkpoints"`
	LogObjects   int       `json:"log_objects"`
	Records      int       `json:"record_objects"`
	KeptByResume int       `json:"checkpoints_kept_for_resumed_runs"`
	// CheckpointsLeft: checkpoints not of an expired run (a kept run's, or
	// one whose manifest names no execution of a listed run or does not
	// decode); left alone.
	CheckpointsLeft int `json:"checkpoints_left"`
	// Failed: deletions that failed (the next collection retries them).
	Failed int `json:"failed"`
}

// Collect runs one collection.
func Collect(ctx context.Context, runs Runs, st Stores, opts Options) (Report, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	listed := now()
	rep := Report{DryRun: opts.DryRun, Cutoff: listed.Add(-opts.OlderThan).UTC()}

	all, err := runs.List(ctx, time.Time{})
	if err != nil {
		return rep, fmt.Errorf("list runs: %w", err)
	}
	latest, err := runs.ScheduleLatest(ctx)
	if err != nil {
		return rep, fmt.Errorf("list schedules: %w", err)
	}
	expired, kept := Select(all, latest, rep.Cutoff)
	rep.RunsExpired, rep.RunsKept = len(expired), len(kept)
	if len(expired) == 0 {
		return rep, nil
	}

	// Checkpoints the kept runs restore from other runs.
	needed := map[exechost.CheckpointID]bool{}
	if err := addCarried(ctx, runs, kept, needed); err != nil {
		return rep, err
	}
	// Which execution IDs belong to which expired run.
	owner := map[exechost.ExecutionID]RunKey{}
	for _, r := range expired {
		in, err := runs.Input(ctx, r.RunKey)
		if err != nil {
			return rep, fmt.Errorf("read input of %s run %s: %w", r.AgentID, r.RunID, err)
		}
		for _, id := range ExecutionIDs(r.RunKey, in) {
			owner[id] = r.RunKey
		}
	}
	doomed, left, err := attribute(ctx, st.Checkpoints, owner)
	if err != nil {
		return rep, err
	}
	rep.CheckpointsLeft = left

	// A run started since the listing may be a resume of an expired run:
	// what it carries is kept too (the window left is the deletion itself).
	late, err := runs.List(ctx, listed.Add(-time.Minute))
	if err != nil {
		return rep, fmt.Errorf("list runs started during gc: %w", err)
	}
	if err := addCarried(ctx, runs, late, needed); err != nil {
		return rep, err
	}

	del := deleter{ctx: ctx, dry: opts.DryRun, rep: &rep, log: log}
	for _, ck := range doomed {
		if needed[ck.id] {
			rep.KeptByResume++
			continue
		}
		// Manifest first: without it the content is invisible (a
		// checkpoint.Object reads the manifest first), so a half-done
		// deletion never leaves a manifest whose content is gone.
		if del.one(st.Checkpoints, ck.manifest) && del.one(st.Checkpoints, ck.content) {
			rep.Checkpoints++
		}
	}
	for _, r := range expired {
		prefix := objstore.EscapeSegment(r.AgentID) + "/" + objstore.EscapeSegment(r.RunID) + "/"
		rep.LogObjects += del.prefix(st.Logs, prefix)
		rep.Records += del.prefix(st.Results, prefix)
	}
	log.Info("gc", "dry_run", rep.DryRun, "cutoff", rep.Cutoff, "runs_expired", rep.RunsExpired,
		"objects", rep.Objects, "bytes", rep.Bytes, "checkpoints", rep.Checkpoints,
		"kept_for_resumed_runs", rep.KeptByResume, "checkpoints_left", rep.CheckpointsLeft, "failed", rep.Failed)
	if rep.Failed > 0 {
		return rep, fmt.Errorf("gc: %d deletions failed (the next run retries them)", rep.Failed)
	}
	return rep, nil
}

// Select splits runs into expired ones (closed at or before cutoff, not a
// schedule's latest run) and kept ones (everything else).
func Select(all []Run, scheduleLatest []RunKey, cutoff time.Time) (expired, kept []Run) {
	latest := make(map[RunKey]bool, len(scheduleLatest))
	for _, k := range scheduleLatest {
		latest[k] = true
	}
	for _, r := range all {
		if !r.Open && !r.CloseTime.After(cutoff) && !latest[r.RunKey] {
			expired = append(expired, r)
		} else {
			kept = append(kept, r)
		}
	}
	return expired, kept
}

// ExecutionIDs are the execution IDs every attempt of run's tool steps
// could have had (activities.ExecutionIDFor, attempts 1..MaxAttempts).
func ExecutionIDs(run RunKey, in *workflows.Input) []exechost.ExecutionID {
	var out []exechost.ExecutionID
	for i := range in.Plan.Steps {
		ps := &in.Plan.Steps[i]
		if ps.Approval != nil {
			continue
		}
		for a := int32(1); a <= workflows.MaxAttempts(ps); a++ {
			out = append(out, activities.ExecutionIDFor(run.AgentID, run.RunID, ps.ID, a))
		}
	}
	return out
}

// addCarried adds the checkpoints runs carry from earlier runs to needed.
// Only a resumed run carries; reading every kept run's first event is the
// price of not trusting anything but history for that.
func addCarried(ctx context.Context, runs Runs, rs []Run, needed map[exechost.CheckpointID]bool) error {
	for _, r := range rs {
		in, err := runs.Input(ctx, r.RunKey)
		if err != nil {
			return fmt.Errorf("read input of %s run %s: %w", r.AgentID, r.RunID, err)
		}
		for _, rec := range in.Carry {
			if rec.CheckpointID != "" {
				needed[exechost.CheckpointID(rec.CheckpointID)] = true
			}
		}
	}
	return nil
}

type doomedCheckpoint struct {
	id                exechost.CheckpointID
	manifest, content objstore.Info
}

// attribute reads every checkpoint manifest and returns those whose
// execution belongs to an expired run (with their content object, when
// present), and how many other manifests it found.
func attribute(ctx context.Context, s objstore.Store, owner map[exechost.ExecutionID]RunKey) ([]doomedCheckpoint, int, error) {
	infos, err := s.List(ctx, "")
	if err != nil {
		return nil, 0, fmt.Errorf("list checkpoints: %w", err)
	}
	byKey := make(map[string]objstore.Info, len(infos))
	for _, in := range infos {
		byKey[in.Key] = in
	}
	var out []doomedCheckpoint
	left := 0
	for _, in := range infos {
		name, ok := strings.CutSuffix(in.Key, ".json")
		id := exechost.CheckpointID(name)
		if !ok || strings.Contains(name, "/") || exechost.CheckCheckpointID(id) != nil {
			continue // not a manifest: foreign, or content
		}
		exec, err := manifestExecution(ctx, s, in.Key)
		if err != nil {
			if ctx.Err() != nil {
				return nil, 0, ctx.Err()
			}
			left++
			continue
		}
		if _, ok := owner[exec]; !ok {
			left++
			continue
		}
		d := doomedCheckpoint{id: id, manifest: in}
		d.content = byKey[name+".tar"] // zero Key: content already gone
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out, left, nil
}

// manifestExecution reads one manifest (bounded and schema-checked by
// checkpoint.DecodeManifest) for its execution ID. Its MAC is not checked:
// whoever can forge one can delete the object anyway.
func manifestExecution(ctx context.Context, s objstore.Store, key string) (exechost.ExecutionID, error) {
	rc, err := s.Get(ctx, key)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	m, err := checkpoint.DecodeManifest(io.Reader(rc))
	if err != nil {
		return "", err
	}
	return m.ExecutionID, nil
}

type deleter struct {
	ctx context.Context
	dry bool
	rep *Report
	log *slog.Logger
}

// one deletes (or counts, dry) one object; a zero Info is nothing to do.
func (d *deleter) one(s objstore.Store, in objstore.Info) bool {
	if in.Key == "" {
		return true
	}
	if !d.dry {
		if err := s.Delete(d.ctx, in.Key); err != nil && !errors.Is(err, objstore.ErrNotFound) {
			d.rep.Failed++
			d.log.Warn("gc: delete", "store", s.String(), "key", in.Key, "error", err)
			return false
		}
	}
	d.rep.Objects++
	d.rep.Bytes += in.Size
	return true
}

// prefix deletes every object under prefix (objstore DeletePrefix: a
// batch on S3, empty directories too in a Dir) and returns how many.
func (d *deleter) prefix(s objstore.Store, prefix string) int {
	var infos []objstore.Info
	var err error
	if d.dry {
		infos, err = s.List(d.ctx, prefix)
	} else {
		infos, err = s.DeletePrefix(d.ctx, prefix)
	}
	if err != nil {
		d.rep.Failed++
		d.log.Warn("gc: delete prefix", "store", s.String(), "prefix", prefix, "error", err)
	}
	for _, in := range infos {
		d.rep.Objects++
		d.rep.Bytes += in.Size
	}
	return len(infos)
}
