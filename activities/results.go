package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/internal/attemptrec"
	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/internal/objstore"
)

// A finished attempt's result must survive the loss of its completion
// report: Temporal unreachable for longer than the heartbeat timeout, or
// the worker dying between finishing and reporting, makes Temporal start
// the next attempt although the tool already ran. So a successful attempt
// records its result and checkpoint in the results store (signed) before
// it reports, and attempt n > 1 first looks for a recorded success of an
// earlier attempt of the same step and, if one holds up, returns it
// without running the tool again.

// CheckpointChecker says whether a checkpoint is still there and
// authentic (checkpoint.Store's Stat; the worker passes its sealed store).
type CheckpointChecker interface {
	Stat(ctx context.Context, id exechost.CheckpointID) (checkpoint.Manifest, error)
}

// record writes the attempt's result to the results store before the
// attempt reports it. A store that cannot take it fails the attempt as
// StoreUnavailable (retried): without the record a lost completion would
// run the tool again, and the next attempt does re-run it (nothing was
// recorded), which is the price of not trusting an unrecorded result.
func (at *attempt) record(ctx context.Context, res *StepResult) error {
	store := at.a.opts.Results
	if store == nil {
		return nil
	}
	out, err := encodeOutput(res.Output)
	if err != nil {
		return failf(failure.SandboxLost, "encode the output of step %s for its attempt record: %v", at.req.StepID, err)
	}
	err = store.Put(ctx, attemptrec.Record{
		AgentID: at.req.AgentID, RunID: at.req.RunID, StepID: at.req.StepID, Attempt: at.number,
		Image: at.req.Image, ImageDigest: res.ImageDigest, CheckpointID: res.CheckpointID,
		Output: out, OutputBytes: res.OutputBytes, Worker: res.Worker, FinishedAt: time.Now().UTC(),
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, objstore.ErrExists):
		// A re-delivery of this very attempt finished before: its record
		// stands (an attempt number is recorded once) and this result is
		// an equally valid outcome of the same attempt.
		at.log.WarnContext(ctx, "attempt record already exists; keeping the first", "error", err)
		return nil
	case canceled(ctx) != nil:
		return canceled(ctx)
	}
	return failf(failure.StoreUnavailable, "record the result of step %s attempt %d: %v", at.req.StepID, at.number, err)
}

// encodeOutput is the output's JSON without HTML escaping (so it is not
// longer than the tool wrote it, give or take whitespace).
func encodeOutput(out map[string]any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// adopt returns the recorded success of an earlier attempt of this step
// (or of this attempt's own earlier delivery), or nil when there is none that holds up. Records are not trusted: one
// is adopted only if it verifies (attemptrec), was made for this request
// (agent, run, step: by its key; image: by its field), its output is one
// JSON object within this worker's inline limit, and its checkpoint still
// exists, verifies and belongs to that attempt's sandbox. Everything else
// is logged and ignored. A results or checkpoint store that cannot be read
// fails the attempt as StoreUnavailable rather than risk running the tool
// twice.
func (at *attempt) adopt(ctx context.Context) (*StepResult, error) {
	store, cps := at.a.opts.Results, at.a.opts.Checkpoints
	if store == nil || cps == nil || (at.number <= 1 && !at.redelivered) {
		return nil, nil
	}
	req := at.req
	entries, err := store.List(ctx, req.AgentID, req.RunID, req.StepID, at.number)
	if err != nil {
		if cerr := canceled(ctx); cerr != nil {
			return nil, cerr
		}
		return nil, failf(failure.StoreUnavailable, "look up earlier attempts of step %s: %v", req.StepID, err)
	}
	for i := len(entries) - 1; i >= 0; i-- { // the latest finished attempt first
		e := entries[i]
		// Earlier attempts, and this one when Temporal delivers it again
		// (its first delivery may have finished and lost its report).
		if e.Attempt > at.number || e.Attempt == at.number && !at.redelivered {
			continue
		}
		ignore := func(why string, args ...any) {
			at.log.WarnContext(ctx, "ignoring attempt record", append([]any{"record", e.Key, "reason", why}, args...)...)
		}
		if e.Err != nil {
			ignore("untrusted", "error", e.Err.Error())
			continue
		}
		rec := e.Record
		if rec.Image != req.Image {
			ignore("made with another image", "record_image", rec.Image)
			continue
		}
		if int64(len(rec.Output)) > at.a.opts.InlineOutputLimit {
			ignore("output over the inline limit", "output_bytes", len(rec.Output))
			continue
		}
		out, perr := parseOutput(rec.Output)
		if perr != nil {
			ignore("output is not one JSON object", "error", perr.Error())
			continue
		}
		if _, bad := errorField(out); bad {
			ignore("output has an error field")
			continue
		}
		m, serr := cps.Stat(ctx, exechost.CheckpointID(rec.CheckpointID))
		switch {
		case serr == nil:
		case errors.Is(serr, exechost.ErrStoreUnavailable):
			if cerr := canceled(ctx); cerr != nil {
				return nil, cerr
			}
			return nil, failf(failure.StoreUnavailable, "check the checkpoint of step %s attempt %d: %v", req.StepID, e.Attempt, serr)
		default:
			ignore("checkpoint not usable", "checkpoint_id", rec.CheckpointID, "error", serr.Error())
			continue
		}
		if want := ExecutionIDFor(req.AgentID, req.RunID, req.StepID, e.Attempt); m.ExecutionID != want {
			ignore("checkpoint belongs to another sandbox", "checkpoint_id", rec.CheckpointID, "execution_id", string(m.ExecutionID))
			continue
		}
		at.adoptedFrom = e.Attempt
		return &StepResult{
			Output:       out,
			CheckpointID: rec.CheckpointID,
			Attempt:      at.number,
			OutputBytes:  rec.OutputBytes,
			ImageDigest:  rec.ImageDigest,
			Worker:       rec.Worker,
			AdoptedFrom:  e.Attempt,
		}, nil
	}
	return nil, nil
}
