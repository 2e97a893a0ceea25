// Package noophost is an ExecutionHost that runs nothing. It is NOT a
// sandbox and must never serve real steps: it exists only to load the
// orchestration (Temporal, AgentWorkflow, RunStep, the stores) without
// the cost of containers (bench/load_test.go, make load). Every Exec
// answers at once with a small JSON object (or, with a failure rate, a
// tool failure), and is counted by execution ID so that a tool attempt
// run twice shows up.
package noophost

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
)

// Host is the no-op host.
type Host struct {
	// FailRate is the probability that an Exec reports a tool failure
	// (exit 1 with an error field): the recovery-under-failure runs.
	FailRate float64
	// Journal, when set, gets one line per Exec (the execution ID) before
	// the exec answers: what survives a kill -9 of the process, so the
	// chaos runs can count, across every worker process that ever ran, an
	// attempt whose tool ran twice (Duplicates). Writes are unbuffered.
	Journal io.Writer

	mu    sync.Mutex
	live  map[exechost.ExecutionID]bool
	execs map[exechost.ExecutionID]int // Exec calls per execution (one per attempt)
	cps   map[exechost.CheckpointID]exechost.ExecutionID
	seq   int
}

var _ exechost.ExecutionHost = (*Host)(nil)

// New returns an empty host.
func New() *Host {
	return &Host{live: map[exechost.ExecutionID]bool{}, execs: map[exechost.ExecutionID]int{},
		cps: map[exechost.CheckpointID]exechost.ExecutionID{}}
}

func (h *Host) Provision(_ context.Context, req exechost.ProvisionRequest) (*exechost.Execution, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live[req.ExecutionID] = true
	return &exechost.Execution{ExecutionID: req.ExecutionID, ImageDigest: "sha256:noop", Deadline: time.Now().Add(req.Resources.Runtime)}, nil
}

func (h *Host) Exec(_ context.Context, id exechost.ExecutionID, req exechost.ExecRequest) (*exechost.ExecResult, error) {
	h.mu.Lock()
	if !h.live[id] {
		h.mu.Unlock()
		return nil, fmt.Errorf("exec %s: %w", id, exechost.ErrTerminated)
	}
	h.execs[id]++
	if h.Journal != nil {
		// Under the lock: lines never interleave. A failed write is not
		// the exec's failure, but it must not go unnoticed either.
		if _, err := io.WriteString(h.Journal, string(id)+"\n"); err != nil {
			h.mu.Unlock()
			return nil, fmt.Errorf("exec %s: journal: %w", id, err)
		}
	}
	h.mu.Unlock()
	if h.FailRate > 0 && rand.Float64() < h.FailRate {
		return &exechost.ExecResult{ExitCode: 1, Stdout: []byte(`{"error":"injected failure"}`)}, nil
	}
	out, _ := json.Marshal(map[string]any{"ok": true, "bytes_in": len(req.Stdin)})
	return &exechost.ExecResult{Stdout: out}, nil
}

func (h *Host) Checkpoint(_ context.Context, id exechost.ExecutionID, _ exechost.CheckpointRequest) (*exechost.Checkpoint, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.live[id] {
		return nil, fmt.Errorf("checkpoint %s: %w", id, exechost.ErrTerminated)
	}
	h.seq++
	cp := exechost.CheckpointID(fmt.Sprintf("noop-%d", h.seq))
	h.cps[cp] = id
	return &exechost.Checkpoint{CheckpointID: cp, ExecutionID: id, CreatedAt: time.Now()}, nil
}

func (h *Host) Restore(ctx context.Context, req exechost.RestoreRequest) (*exechost.Execution, error) {
	return h.Provision(ctx, exechost.ProvisionRequest{ExecutionID: req.ExecutionID, Resources: *req.Resources})
}

func (h *Host) Terminate(_ context.Context, id exechost.ExecutionID) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.live, id)
	return nil
}

// Stat makes the host's checkpoints visible to attempt adoption.
func (h *Host) Stat(_ context.Context, id exechost.CheckpointID) (checkpoint.Manifest, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	exe, ok := h.cps[id]
	if !ok {
		return checkpoint.Manifest{}, fmt.Errorf("checkpoint %s: %w", id, exechost.ErrNotFound)
	}
	return checkpoint.Manifest{ID: id, ExecutionID: exe}, nil
}

// Stats are the host's counts.
type Stats struct {
	Execs      int `json:"execs"`      // Exec calls
	Executions int `json:"executions"` // distinct execution IDs (attempts) that ran
	// Duplicated are execution IDs (one attempt of one step of one run)
	// whose tool ran more than once.
	Duplicated int `json:"duplicated"`
	Live       int `json:"live"` // sandboxes not terminated
}

// Stats counts what ran.
func (h *Host) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := Stats{Executions: len(h.execs), Live: len(h.live)}
	for _, n := range h.execs {
		s.Execs += n
		if n > 1 {
			s.Duplicated++
		}
	}
	return s
}

// Duplicates reads journals (Journal's lines, from any number of
// processes) and returns the execution IDs that ran more than once, with
// their counts, and the number of lines read. A partial last line (a
// process killed mid-write) counts as written.
func Duplicates(journals ...io.Reader) (map[exechost.ExecutionID]int, int, error) {
	seen := map[exechost.ExecutionID]int{}
	lines := 0
	for _, j := range journals {
		sc := bufio.NewScanner(j)
		for sc.Scan() {
			if sc.Text() == "" {
				continue
			}
			seen[exechost.ExecutionID(sc.Text())]++
			lines++
		}
		if err := sc.Err(); err != nil {
			return nil, lines, fmt.Errorf("read journal: %w", err)
		}
	}
	dup := map[exechost.ExecutionID]int{}
	for id, n := range seen {
		if n > 1 {
			dup[id] = n
		}
	}
	return dup, lines, nil
}
