package gc

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/workflows"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func TestSelect(t *testing.T) {
	cutoff := now.Add(-30 * 24 * time.Hour)
	run := func(id string, open bool, closed time.Time) Run {
		return Run{RunKey: RunKey{AgentID: id, RunID: "r-" + id}, Open: open, CloseTime: closed}
	}
	tests := []struct {
		name        string
		run         Run
		schedLatest bool
		wantExpired bool
	}{
		{name: "closed long ago", run: run("old", false, cutoff.Add(-time.Hour)), wantExpired: true},
		{name: "closed exactly at the cut-off", run: run("edge", false, cutoff), wantExpired: true},
		{name: "closed within retention", run: run("recent", false, cutoff.Add(time.Hour))},
		{name: "open, started long ago", run: run("open", true, time.Time{})},
		{name: "a schedule's latest run, closed long ago", run: run("sched", false, cutoff.Add(-time.Hour)), schedLatest: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var latest []RunKey
			if tc.schedLatest {
				latest = []RunKey{tc.run.RunKey}
			}
			expired, kept := Select([]Run{tc.run}, latest, cutoff)
			if tc.wantExpired {
				require.Equal(t, []Run{tc.run}, expired)
				require.Empty(t, kept)
			} else {
				require.Empty(t, expired)
				require.Equal(t, []Run{tc.run}, kept)
			}
		})
	}
}

func TestExecutionIDsCoverEveryAttempt(t *testing.T) {
	in := &workflows.Input{Plan: spec.Plan{Steps: []spec.PlanStep{
		{ID: "a", Tool: "t:1", Retries: 2},
		{ID: "gate", Approval: &spec.Approval{Prompt: "ok?"}},
	}}}
	ids := ExecutionIDs(RunKey{AgentID: "ag", RunID: "r1"}, in)
	require.Len(t, ids, 2+5, "retries + the infrastructure budget; approvals have no sandbox")
	require.Equal(t, activities.ExecutionIDFor("ag", "r1", "a", 1), ids[0])
	require.Equal(t, activities.ExecutionIDFor("ag", "r1", "a", 7), ids[6])
}

// fakeRuns is a Runs over fixed data; started lists runs that List(since)
// returns (runs started during gc).
type fakeRuns struct {
	runs    []Run
	inputs  map[RunKey]*workflows.Input
	latest  []RunKey
	started []Run
	err     error
}

func (f *fakeRuns) List(_ context.Context, since time.Time) ([]Run, error) {
	if f.err != nil {
		return nil, f.err
	}
	if !since.IsZero() {
		return f.started, nil
	}
	return f.runs, nil
}

func (f *fakeRuns) Input(_ context.Context, k RunKey) (*workflows.Input, error) {
	in, ok := f.inputs[k]
	if !ok {
		return nil, fmt.Errorf("no run %v", k)
	}
	return in, nil
}

func (f *fakeRuns) ScheduleLatest(context.Context) ([]RunKey, error) { return f.latest, nil }

// world is a set of runs, each with one tool step whose attempts left
// checkpoints, logs and records in Mem stores.
type world struct {
	t      *testing.T
	runs   *fakeRuns
	stores Stores
	n      int
}

func newWorld(t *testing.T) *world {
	return &world{t: t, runs: &fakeRuns{inputs: map[RunKey]*workflows.Input{}},
		stores: Stores{Checkpoints: objstore.NewMem(), Logs: objstore.NewMem(), Results: objstore.NewMem()}}
}

func (w *world) put(s objstore.Store, key, body string) {
	_, err := s.Put(w.t.Context(), key, strings.NewReader(body), objstore.PutOptions{})
	require.NoError(w.t, err)
}

// checkpoint stores a checkpoint of attempt a of step "s" of run k.
func (w *world) checkpoint(k RunKey, a int32) string {
	w.n++
	id := exechost.CheckpointID(fmt.Sprintf("ckpt-%032x", w.n))
	m := checkpoint.Manifest{SchemaVersion: checkpoint.SchemaVersion, ID: id,
		ExecutionID: activities.ExecutionIDFor(k.AgentID, k.RunID, "s", a), ImageDigest: "sha256:" + strings.Repeat("a", 64),
		Resources: exechost.ResourceLimits{NanoCPUs: 1, MemoryBytes: 1, DiskBytes: 1, Pids: 1, Runtime: time.Second, MaxOutputBytes: 1},
		SHA256:    strings.Repeat("b", 64), SizeBytes: 10, CreatedAt: now, KeyID: "k", MAC: "m"}
	b, err := checkpoint.EncodeManifest(m)
	require.NoError(w.t, err)
	w.put(w.stores.Checkpoints, string(id)+".json", string(b))
	w.put(w.stores.Checkpoints, string(id)+".tar", "0123456789")
	return string(id)
}

// run adds a run with one step "s" that had attempts checkpoints; carry
// names checkpoints the run took from an earlier run.
func (w *world) run(agent string, open bool, closed time.Time, attempts int32, carry ...string) (RunKey, []string) {
	k := RunKey{AgentID: agent, RunID: "run-" + agent + fmt.Sprint(len(w.runs.runs))}
	w.runs.runs = append(w.runs.runs, Run{RunKey: k, Open: open, CloseTime: closed})
	in := &workflows.Input{Plan: spec.Plan{Steps: []spec.PlanStep{{ID: "s", Tool: "t:1"}}}, Carry: map[string]workflows.StepRecord{}}
	for i, c := range carry {
		in.Carry[fmt.Sprintf("c%d", i)] = workflows.StepRecord{CheckpointID: c}
	}
	w.runs.inputs[k] = in
	var cks []string
	for a := int32(1); a <= attempts; a++ {
		cks = append(cks, w.checkpoint(k, a))
		prefix := objstore.EscapeSegment(k.AgentID) + "/" + objstore.EscapeSegment(k.RunID) + "/s/"
		w.put(w.stores.Logs, prefix+fmt.Sprintf("%d/000000.aaaa.chunk", a), "log")
		w.put(w.stores.Results, prefix+fmt.Sprintf("%d.json", a), "{}")
	}
	return k, cks
}

func keys(t *testing.T, s objstore.Store) []string {
	infos, err := s.List(t.Context(), "")
	require.NoError(t, err)
	var out []string
	for _, in := range infos {
		out = append(out, in.Key)
	}
	sort.Strings(out)
	return out
}

func size(t *testing.T, st Stores) int64 {
	var n int64
	for _, s := range []objstore.Store{st.Checkpoints, st.Logs, st.Results} {
		infos, err := s.List(t.Context(), "")
		require.NoError(t, err)
		for _, in := range infos {
			n += in.Size
		}
	}
	return n
}

func hasCheckpoint(t *testing.T, s objstore.Store, id string) bool {
	ks := keys(t, s)
	json, tar := sort.SearchStrings(ks, id+".json"), sort.SearchStrings(ks, id+".tar")
	hasJSON := json < len(ks) && ks[json] == id+".json"
	hasTar := tar < len(ks) && ks[tar] == id+".tar"
	require.Equal(t, hasJSON, hasTar, "checkpoint %s half deleted", id)
	return hasJSON
}

func hasPrefix(t *testing.T, s objstore.Store, k RunKey) bool {
	infos, err := s.List(t.Context(), objstore.EscapeSegment(k.AgentID)+"/"+objstore.EscapeSegment(k.RunID)+"/")
	require.NoError(t, err)
	return len(infos) > 0
}

func TestCollect(t *testing.T) {
	old := now.Add(-40 * 24 * time.Hour)
	w := newWorld(t)
	expired, expCks := w.run("expired", false, old, 2)
	recent, recentCks := w.run("recent", false, now.Add(-time.Hour), 1)
	open, openCks := w.run("open", true, time.Time{}, 1)
	// "failed" is past retention, but an open run resumed from it.
	failed, failedCks := w.run("resumed", false, old, 1)
	resumed, _ := w.run("resumed", true, time.Time{}, 1, failedCks[0])
	sched, schedCks := w.run("sched", false, old, 1)
	w.runs.latest = []RunKey{sched}
	// A run started while gc ran, carrying from another expired run.
	raced, racedCks := w.run("raced", false, old, 1)
	late := Run{RunKey: RunKey{AgentID: "raced", RunID: "late"}, Open: true}
	w.runs.inputs[late.RunKey] = &workflows.Input{Carry: map[string]workflows.StepRecord{"s": {CheckpointID: racedCks[0]}}}
	w.runs.started = []Run{late}
	// Foreign objects and a manifest nobody owns.
	w.put(w.stores.Checkpoints, "README.txt", "not ours")
	w.put(w.stores.Checkpoints, "other/ckpt-1.json", "{}")
	orphan := w.checkpoint(RunKey{AgentID: "unknown", RunID: "gone"}, 1)
	w.put(w.stores.Logs, "unknown/gone/s/1/000000.aaaa.chunk", "log")

	ctx := t.Context()
	opts := Options{OlderThan: 30 * 24 * time.Hour, Now: func() time.Time { return now }}

	// Dry run: reports, deletes nothing.
	before := [3][]string{keys(t, w.stores.Checkpoints), keys(t, w.stores.Logs), keys(t, w.stores.Results)}
	dry := opts
	dry.DryRun = true
	rep, err := Collect(ctx, w.runs, w.stores, dry)
	require.NoError(t, err)
	require.Equal(t, [3][]string{keys(t, w.stores.Checkpoints), keys(t, w.stores.Logs), keys(t, w.stores.Results)}, before)
	require.True(t, rep.DryRun)

	sizeBefore := size(t, w.stores)
	got, err := Collect(ctx, w.runs, w.stores, opts)
	require.NoError(t, err)
	rep.DryRun = false
	require.Equal(t, rep, got, "a dry run reports what the real one frees")

	// expired, failed and raced are expired (sched is a schedule's latest).
	require.Equal(t, 3, got.RunsExpired)
	require.Equal(t, 2, got.Checkpoints, "expired's two; failed's and raced's are carried by open runs")
	require.Equal(t, 2, got.KeptByResume)
	require.Equal(t, 5, got.CheckpointsLeft, "the checkpoints of recent, open, resumed and sched, and the orphan")
	require.Equal(t, 2*2+4+4, got.Objects, "2 checkpoints (2 objects each), the logs and records of 3 runs (2+1+1 attempts)")
	require.Equal(t, size(t, w.stores)+got.Bytes, sizeBefore, "bytes reported are bytes freed")

	for _, id := range expCks {
		require.False(t, hasCheckpoint(t, w.stores.Checkpoints, id), "expired run's checkpoint %s", id)
	}
	for _, id := range append(append(append(append(recentCks, openCks...), failedCks...), schedCks...), racedCks...) {
		require.True(t, hasCheckpoint(t, w.stores.Checkpoints, id), "checkpoint %s still needed", id)
	}
	require.True(t, hasCheckpoint(t, w.stores.Checkpoints, orphan), "unattributed checkpoints stay")
	for _, k := range []RunKey{expired, failed, raced} {
		require.False(t, hasPrefix(t, w.stores.Logs, k), "logs of %v", k)
		require.False(t, hasPrefix(t, w.stores.Results, k), "records of %v", k)
	}
	for _, k := range []RunKey{recent, open, resumed, sched, {AgentID: "unknown", RunID: "gone"}} {
		require.True(t, hasPrefix(t, w.stores.Logs, k), "logs of %v", k)
	}
	require.Contains(t, keys(t, w.stores.Checkpoints), "README.txt")
	require.Contains(t, keys(t, w.stores.Checkpoints), "other/ckpt-1.json")

	// Idempotent: nothing more to free.
	again, err := Collect(ctx, w.runs, w.stores, opts)
	require.NoError(t, err)
	require.Zero(t, again.Objects)
}

func TestCollectDeletesNothingOnPartialAnswers(t *testing.T) {
	w := newWorld(t)
	_, cks := w.run("expired", false, now.Add(-40*24*time.Hour), 1)
	before := keys(t, w.stores.Checkpoints)
	opts := Options{OlderThan: time.Hour, Now: func() time.Time { return now }}

	w.runs.err = errors.New("visibility down")
	_, err := Collect(t.Context(), w.runs, w.stores, opts)
	require.ErrorContains(t, err, "visibility down")
	w.runs.err = nil

	// A kept run whose input cannot be read: its carried checkpoints are
	// unknown, so nothing is deleted.
	w.runs.runs = append(w.runs.runs, Run{RunKey: RunKey{AgentID: "x", RunID: "no-history"}, Open: true})
	_, err = Collect(t.Context(), w.runs, w.stores, opts)
	require.ErrorContains(t, err, "no-history")
	require.Equal(t, before, keys(t, w.stores.Checkpoints))

	// A store that fails to list checkpoints.
	w.runs.runs = w.runs.runs[:1]
	w.stores.Checkpoints.(*objstore.Mem).Fail = errors.New("bucket gone")
	_, err = Collect(t.Context(), w.runs, w.stores, opts)
	require.ErrorContains(t, err, "bucket gone")
	w.stores.Checkpoints.(*objstore.Mem).Fail = nil
	require.True(t, hasCheckpoint(t, w.stores.Checkpoints, cks[0]))
}
