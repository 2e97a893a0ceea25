package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/internal/attemptrec"
	"github.com/agentflow/agentflow/internal/logstore"
	"github.com/agentflow/agentflow/internal/objstore"
)

func testKeys(t *testing.T, id string) *checkpoint.Keyring {
	t.Helper()
	k, err := checkpoint.NewKeyring(checkpoint.Key{ID: id, Secret: bytes.Repeat([]byte(id[:1]), checkpoint.MinKeyBytes)})
	require.NoError(t, err)
	return k
}

// withResults gives the harness a results store over mem and the fake host
// as checkpoint checker.
func (h *harness) withResults(t *testing.T, mem objstore.Store) {
	t.Helper()
	rs, err := attemptrec.New(mem, testKeys(t, "mine"), 0)
	require.NoError(t, err)
	h.opts.Results = rs
	h.opts.Checkpoints = h.host
}

// countingTool is a tool that reports how often it ran.
func countingTool(runs *atomic.Int32) func(context.Context, exechost.ExecRequest) (*exechost.ExecResult, error) {
	return func(_ context.Context, req exechost.ExecRequest) (*exechost.ExecResult, error) {
		n := runs.Add(1)
		out, _ := json.Marshal(map[string]any{"run": n, "attempt": req.Env["AGENTFLOW_ATTEMPT"], "html": "<b>&</b>"})
		return &exechost.ExecResult{Stdout: out}, nil
	}
}

func readObj(t *testing.T, s objstore.Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(t.Context(), key)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return b
}

func replaceObj(t *testing.T, s objstore.Store, key string, b []byte) {
	t.Helper()
	require.NoError(t, s.Delete(t.Context(), key))
	_, err := s.Put(t.Context(), key, bytes.NewReader(b), objstore.PutOptions{})
	require.NoError(t, err)
}

// Attempt 1 finishes and records its result; its report is lost (the
// workflow starts attempt 2). Attempt 2 adopts the record: the tool does
// not run again, unless the record does not hold up.
func TestAdoptFinishedPredecessor(t *testing.T) {
	rec1 := attemptrec.Key("agent-1", "run-1", "fetch", 1)
	tests := []struct {
		name string
		// tamper runs between the two attempts.
		tamper func(t *testing.T, h *harness, mem *objstore.Mem, req *StepRequest)
		adopt  bool
		// rerunFails: the re-run is refused too (the same limit applies).
		rerunFails string
	}{
		{name: "record holds up", adopt: true},
		{name: "forged by a bucket writer", tamper: func(t *testing.T, h *harness, mem *objstore.Mem, _ *StepRequest) {
			foreign, err := attemptrec.New(mem, testKeys(t, "xforeign"), 0)
			require.NoError(t, err)
			var rec attemptrec.Record
			require.NoError(t, json.Unmarshal(recordBody(t, readObj(t, mem, rec1)), &rec))
			rec.Output = json.RawMessage(`{"run":99}`)
			require.NoError(t, mem.Delete(t.Context(), rec1))
			require.NoError(t, foreign.Put(t.Context(), rec))
		}},
		{name: "output edited", tamper: func(t *testing.T, _ *harness, mem *objstore.Mem, _ *StepRequest) {
			orig := readObj(t, mem, rec1)
			b := bytes.Replace(orig, []byte(`"run":1`), []byte(`"run":7`), 1)
			require.NotEqual(t, orig, b)
			replaceObj(t, mem, rec1, b)
		}},
		{name: "genuine record of another step moved in", tamper: func(t *testing.T, h *harness, mem *objstore.Mem, _ *StepRequest) {
			var rec attemptrec.Record
			require.NoError(t, json.Unmarshal(recordBody(t, readObj(t, mem, rec1)), &rec))
			rec.StepID = "other"
			require.NoError(t, h.opts.Results.Put(t.Context(), rec)) // signed with our own key
			replaceObj(t, mem, rec1, readObj(t, mem, attemptrec.Key("agent-1", "run-1", "other", 1)))
		}},
		{name: "another image", tamper: func(_ *testing.T, _ *harness, _ *objstore.Mem, req *StepRequest) {
			req.Image = "sha256:" + strings.Repeat("f", 64)
		}},
		{name: "output over this worker's inline limit", tamper: func(_ *testing.T, h *harness, _ *objstore.Mem, _ *StepRequest) {
			h.opts.InlineOutputLimit = 8
		}, rerunFails: ErrTypeOutputLimit},
		{name: "checkpoint gone", tamper: func(_ *testing.T, h *harness, _ *objstore.Mem, _ *StepRequest) {
			h.host.mu.Lock()
			clear(h.host.stored)
			h.host.mu.Unlock()
		}},
		{name: "checkpoint of another sandbox", tamper: func(_ *testing.T, h *harness, _ *objstore.Mem, _ *StepRequest) {
			h.host.mu.Lock()
			for id := range h.host.stored {
				h.host.stored[id] = "af-someoneelse"
			}
			h.host.mu.Unlock()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.opts.Identity = "w-first"
			mem := objstore.NewMem()
			h.withResults(t, mem)
			var runs atomic.Int32
			h.host.exec = countingTool(&runs)
			req := baseReq()
			req.Attempt = 1
			first, err := h.run(t, req)
			require.NoError(t, err)
			require.Equal(t, int32(1), runs.Load())
			_, err = mem.Stat(t.Context(), rec1)
			require.NoError(t, err, "the attempt is recorded before it reports")

			if tt.tamper != nil {
				tt.tamper(t, h, mem, &req)
			}
			h.opts.Identity = "w-second"
			req.Attempt = 2
			second, err := h.run(t, req)
			if tt.rerunFails != "" {
				app, _ := failureDetails(t, err)
				require.Equal(t, tt.rerunFails, app.Type())
				require.Equal(t, int32(2), runs.Load(), "the record is ignored: the tool runs")
				return
			}
			require.NoError(t, err)
			if !tt.adopt {
				require.Equal(t, int32(2), runs.Load(), "an untrusted record is ignored: the tool runs")
				require.Zero(t, second.AdoptedFrom)
				require.Equal(t, "w-second", second.Worker)
				return
			}
			require.Equal(t, int32(1), runs.Load(), "the tool does not run twice")
			require.Equal(t, int32(1), second.AdoptedFrom)
			require.Equal(t, int32(2), second.Attempt)
			require.Equal(t, first.Output, second.Output)
			require.Equal(t, first.CheckpointID, second.CheckpointID)
			require.Equal(t, "w-first", second.Worker, "Worker names who ran the tool")
			provisions, _, _, _, _ := h.host.snapshot()
			require.Len(t, provisions, 1, "no sandbox for the adopting attempt")
			require.InDelta(t, 1, testutil.ToFloat64(h.metrics.AttemptsAdopted.WithLabelValues("echo:1.0")), 0)
			require.InDelta(t, 1, testutil.ToFloat64(h.metrics.ToolInvocations.WithLabelValues("echo:1.0", "success", "none")), 0)
			b, err := h.logs.Read(t.Context(), logstore.Key{AgentID: req.AgentID, RunID: req.RunID, StepID: req.StepID, Attempt: 2}, 0)
			require.NoError(t, err)
			require.Contains(t, string(b), "attempt 2 adopted the recorded result of attempt 1")
		})
	}
}

// recordBody extracts the signed record from its envelope.
func recordBody(t *testing.T, env []byte) []byte {
	t.Helper()
	var e struct {
		Record json.RawMessage `json:"record"`
	}
	require.NoError(t, json.Unmarshal(env, &e))
	return e.Record
}

// The first attempt never looks for predecessors; later attempts ignore
// records of themselves and of later attempts.
func TestAdoptOnlyEarlierAttempts(t *testing.T) {
	h := newHarness(t)
	mem := objstore.NewMem()
	h.withResults(t, mem)
	var runs atomic.Int32
	h.host.exec = countingTool(&runs)
	req := baseReq()
	req.Attempt = 3
	_, err := h.run(t, req)
	require.NoError(t, err)
	req.Attempt = 2
	res, err := h.run(t, req)
	require.NoError(t, err)
	require.Zero(t, res.AdoptedFrom, "attempt 3's record is not attempt 2's predecessor")
	require.Equal(t, int32(2), runs.Load())
}

func TestResultsStoreOutage(t *testing.T) {
	t.Run("record cannot be written", func(t *testing.T) {
		h := newHarness(t)
		mem := objstore.NewMem()
		h.withResults(t, mem)
		mem.Fail = errors.New("connection refused")
		req := baseReq()
		req.Attempt = 1
		_, err := h.run(t, req)
		app, d := failureDetails(t, err)
		require.Equal(t, "StoreUnavailable", app.Type())
		require.False(t, app.NonRetryable())
		require.Contains(t, app.Message(), "record the result of step fetch attempt 1")
		require.Contains(t, app.Message(), "connection refused")
		require.Equal(t, int32(1), d.Attempt)
		require.InDelta(t, 1, testutil.ToFloat64(h.metrics.AttemptFailures.WithLabelValues("echo:1.0", "infrastructure", "StoreUnavailable")), 0)
	})
	t.Run("predecessors cannot be listed", func(t *testing.T) {
		h := newHarness(t)
		mem := objstore.NewMem()
		h.withResults(t, mem)
		mem.Fail = errors.New("connection refused")
		req := baseReq()
		req.Attempt = 2
		_, err := h.run(t, req)
		app, _ := failureDetails(t, err)
		require.Equal(t, "StoreUnavailable", app.Type())
		provisions, _, _, _, _ := h.host.snapshot()
		require.Empty(t, provisions, "no tool runs while it is unknown whether one already finished")
	})
	t.Run("checkpoint store unavailable", func(t *testing.T) {
		h := newHarness(t)
		mem := objstore.NewMem()
		h.withResults(t, mem)
		req := baseReq()
		req.Attempt = 1
		_, err := h.run(t, req)
		require.NoError(t, err)
		h.host.statErr = objstore.ErrUnavailable
		req.Attempt = 2
		_, err = h.run(t, req)
		app, _ := failureDetails(t, err)
		require.Equal(t, "StoreUnavailable", app.Type())
	})
}

func TestFailureMetricsKeepToolAndInfrastructureApart(t *testing.T) {
	h := newHarness(t)
	h.host.exec = result("", "", 3)
	_, err := h.run(t, baseReq())
	require.Error(t, err)
	h.host.provisionErr = errors.New("daemon down")
	_, err = h.run(t, baseReq())
	require.Error(t, err)
	h.host.provisionErr = &exechost.PolicyError{Field: "image", Reason: "no"}
	_, err = h.run(t, baseReq())
	require.Error(t, err)
	require.InDelta(t, 1, testutil.ToFloat64(h.metrics.AttemptFailures.WithLabelValues("echo:1.0", "tool", "ToolFailed")), 0)
	require.InDelta(t, 1, testutil.ToFloat64(h.metrics.AttemptFailures.WithLabelValues("echo:1.0", "infrastructure", "SandboxLost")), 0)
	require.InDelta(t, 1, testutil.ToFloat64(h.metrics.AttemptFailures.WithLabelValues("echo:1.0", "other", "PolicyViolation")), 0)
}

// A numbered attempt that Temporal delivers again (server-side retry of
// the same activity) adopts its own first delivery's record; a first
// delivery never does.
func TestAdoptOwnEarlierDelivery(t *testing.T) {
	h := newHarness(t)
	mem := objstore.NewMem()
	h.withResults(t, mem)
	var runs atomic.Int32
	h.host.exec = countingTool(&runs)
	req := baseReq()
	req.Attempt = 2
	_, err := h.run(t, req)
	require.NoError(t, err)

	for _, redelivered := range []bool{false, true} {
		opts := h.opts
		opts.Host = h.host
		at := &attempt{a: New(opts), req: req, number: 2, redelivered: redelivered, log: New(opts).log}
		res, err := at.adopt(t.Context())
		require.NoError(t, err)
		if !redelivered {
			require.Nil(t, res, "a first delivery has no record of itself to adopt")
			continue
		}
		require.NotNil(t, res)
		require.Equal(t, int32(2), res.AdoptedFrom)
	}
}
