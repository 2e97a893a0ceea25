package activities

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
)

// fakeHost is a scripted ExecutionHost that records every call. It keeps
// the parts of the contract RunStep relies on: Terminate is idempotent, a
// canceled Exec destroys the sandbox and returns ErrAborted, checkpoints
// get fresh IDs.
type fakeHost struct {
	mu sync.Mutex

	// exec decides what the tool does; nil echoes stdin as stdout.
	exec         func(ctx context.Context, req exechost.ExecRequest) (*exechost.ExecResult, error)
	provisionErr error
	checkpoint   error

	provisions  []exechost.ProvisionRequest
	execs       []exechost.ExecRequest
	checkpoints []exechost.ExecutionID
	cpRequests  []exechost.CheckpointRequest // every Checkpoint call, refused ones too
	terminates  []exechost.ExecutionID
	live        map[exechost.ExecutionID]bool
	stored      map[exechost.CheckpointID]exechost.ExecutionID // every checkpoint made, for Stat
	statErr     error                                          // returned by Stat when set
	execStarted chan struct{}                                  // closed when the first Exec starts, if set
}

func newFakeHost() *fakeHost {
	return &fakeHost{live: map[exechost.ExecutionID]bool{}, stored: map[exechost.CheckpointID]exechost.ExecutionID{}}
}

// Stat makes the fake's checkpoints visible as a CheckpointChecker.
func (h *fakeHost) Stat(_ context.Context, id exechost.CheckpointID) (checkpoint.Manifest, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.statErr != nil {
		return checkpoint.Manifest{}, h.statErr
	}
	exe, ok := h.stored[id]
	if !ok {
		return checkpoint.Manifest{}, fmt.Errorf("checkpoint %s: %w", id, exechost.ErrNotFound)
	}
	return checkpoint.Manifest{ID: id, ExecutionID: exe}, nil
}

func (h *fakeHost) Provision(_ context.Context, req exechost.ProvisionRequest) (*exechost.Execution, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.provisions = append(h.provisions, req)
	if h.provisionErr != nil {
		return nil, h.provisionErr
	}
	h.live[req.ExecutionID] = true
	return &exechost.Execution{ExecutionID: req.ExecutionID, ImageDigest: "sha256:fake", Deadline: time.Now().Add(req.Resources.Runtime)}, nil
}

func (h *fakeHost) Exec(ctx context.Context, id exechost.ExecutionID, req exechost.ExecRequest) (*exechost.ExecResult, error) {
	h.mu.Lock()
	h.execs = append(h.execs, req)
	alive := h.live[id]
	fn := h.exec
	started := h.execStarted
	h.mu.Unlock()
	if !alive {
		return nil, fmt.Errorf("exec %s: %w", id, exechost.ErrTerminated)
	}
	if started != nil {
		close(started)
	}
	if fn == nil {
		return &exechost.ExecResult{Stdout: req.Stdin}, nil
	}
	res, err := fn(ctx, req)
	if err != nil {
		h.mu.Lock()
		delete(h.live, id) // timeout, overflow, abort destroy the sandbox
		h.mu.Unlock()
	}
	return res, err
}

func (h *fakeHost) Checkpoint(_ context.Context, id exechost.ExecutionID, req exechost.CheckpointRequest) (*exechost.Checkpoint, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cpRequests = append(h.cpRequests, req)
	if !h.live[id] {
		return nil, fmt.Errorf("checkpoint %s: %w", id, exechost.ErrTerminated)
	}
	if h.checkpoint != nil {
		return nil, h.checkpoint
	}
	h.checkpoints = append(h.checkpoints, id)
	cp := exechost.CheckpointID(fmt.Sprintf("cp-%s-%d", id, len(h.checkpoints)))
	h.stored[cp] = id
	return &exechost.Checkpoint{
		CheckpointID: cp,
		ExecutionID:  id,
		SizeBytes:    1024,
	}, nil
}

func (h *fakeHost) Restore(context.Context, exechost.RestoreRequest) (*exechost.Execution, error) {
	return nil, fmt.Errorf("restore: %w", exechost.ErrNotFound)
}

func (h *fakeHost) Terminate(_ context.Context, id exechost.ExecutionID) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.terminates = append(h.terminates, id)
	delete(h.live, id)
	return nil
}

func (h *fakeHost) checkpointRequests() []exechost.CheckpointRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]exechost.CheckpointRequest(nil), h.cpRequests...)
}

func (h *fakeHost) snapshot() (provisions []exechost.ProvisionRequest, execs []exechost.ExecRequest, checkpoints, terminates []exechost.ExecutionID, live int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.provisions, h.execs, h.checkpoints, h.terminates, len(h.live)
}
