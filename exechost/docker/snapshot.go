package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/exechost/docker/runner"
	"github.com/agentflow/agentflow/exechost/docker/workspace"
)

// Checkpoint implements exechost.ExecutionHost.
func (h *Host) Checkpoint(ctx context.Context, id exechost.ExecutionID, req exechost.CheckpointRequest) (*exechost.Checkpoint, error) {
	e, err := h.lookup(id)
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()

	ckID := exechost.CheckpointID("ckpt-" + randomHex(16))
	ctx, cancel := context.WithDeadline(ctx, e.deadline)
	defer cancel()

	pr, pw := io.Pipe()
	type putResult struct {
		m   checkpoint.Manifest
		err error
	}
	putDone := make(chan putResult, 1)
	go func() {
		m, err := h.store.Put(ctx, checkpoint.Manifest{
			ID: ckID, ExecutionID: id, ImageDigest: e.imageID, Resources: e.resources, Reason: req.Reason,
		}, pr, nil)
		pr.CloseWithError(err) // a failed store stops the export instead of blocking it
		putDone <- putResult{m, err}
	}()
	res, expErr := workspace.Export(ctx, h.run, e.containerID, h.policy.User(),
		workspace.Limits{MaxBytes: e.resources.DiskBytes, MaxEntries: h.entries},
		workspace.Redaction{Values: req.Redact, Inherited: e.inherited}, pw)
	pw.CloseWithError(expErr)
	put := <-putDone
	if res.Destroyed {
		h.lost(e)
	}
	switch {
	case put.err != nil && expErr != nil && errors.Is(expErr, put.err):
		// The store failed first (full, unreachable) and the closed pipe
		// stopped the export: the store's error is the cause, stated once.
		// The sandbox is fine; the attempt is an infrastructure failure.
		return nil, fmt.Errorf("checkpoint %s: %w", id, put.err)
	case expErr != nil:
		_ = h.store.Delete(context.WithoutCancel(ctx), ckID)
		if errors.Is(expErr, runner.ErrContainerGone) {
			h.lost(e)
			return nil, fmt.Errorf("checkpoint %s: %w: %w", id, exechost.ErrTerminated, expErr)
		}
		if errors.Is(expErr, workspace.ErrUnsafeEntry) {
			// The tool made an entry no checkpoint may hold (an escaping
			// symlink, a hard link, a device): its doing, never retried.
			return nil, fmt.Errorf("checkpoint %s: %w: %w", id,
				&exechost.PolicyError{Field: exechost.PolicyFieldCheckpointWorkspace, Reason: "workspace entry refused"}, expErr)
		}
		if errors.Is(expErr, workspace.ErrSecretName) {
			return nil, fmt.Errorf("checkpoint %s: %w: %w", id,
				&exechost.PolicyError{Field: exechost.PolicyFieldRedact, Reason: "workspace entry refused"}, expErr)
		}
		return nil, fmt.Errorf("checkpoint %s: %w", id, expErr)
	case put.err != nil:
		return nil, fmt.Errorf("checkpoint %s: %w", id, put.err)
	}
	m := put.m
	return &exechost.Checkpoint{CheckpointID: m.ID, ExecutionID: m.ExecutionID, ImageDigest: m.ImageDigest,
		SizeBytes: m.SizeBytes, SHA256: m.SHA256, CreatedAt: m.CreatedAt}, nil
}

// Restore implements exechost.ExecutionHost: a Provision, fully validated,
// whose workspace is the checkpoint. Image and resources come only from the
// request: a manifest is data from storage, and even an authentic one only
// says what the checkpoint was made with, not what this step may use.
//
// A checkpoint that cannot be read (unknown, a manifest failing its check,
// the store down) is reported before anything wrong with the request. The
// manifest is read once on success (Provision's Get); only a failed restore
// reads it again, to tell which error comes first.
func (h *Host) Restore(ctx context.Context, req exechost.RestoreRequest) (*exechost.Execution, error) {
	x, err := h.restore(ctx, req)
	if err == nil {
		return x, nil
	}
	if _, serr := h.store.Stat(ctx, req.CheckpointID); serr != nil {
		return nil, fmt.Errorf("restore %s: %w", req.CheckpointID, serr)
	}
	return nil, err
}

func (h *Host) restore(ctx context.Context, req exechost.RestoreRequest) (*exechost.Execution, error) {
	p, err := exechost.RestoreProvision(req)
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", req.CheckpointID, err)
	}
	if p.ExecutionID == "" {
		p.ExecutionID = exechost.ExecutionID("restore-" + randomHex(12))
	}
	return h.Provision(ctx, p)
}

// openedCheckpoints are a workspace's checkpoint layers, opened (one Get
// each: manifest read and authenticated, content reader verifying every
// byte) before the sandbox exists, so an unknown or forged checkpoint is
// refused without a container and the manifest is not read twice.
type openedCheckpoints struct {
	mu  sync.Mutex
	rcs []io.ReadCloser // nil once handed to the import
}

func (h *Host) openCheckpoints(ctx context.Context, ids []exechost.CheckpointID) (*openedCheckpoints, error) {
	o := &openedCheckpoints{}
	for _, id := range ids {
		_, rc, err := h.store.Get(ctx, id)
		if err != nil {
			o.close()
			return nil, err
		}
		o.rcs = append(o.rcs, rc)
	}
	return o, nil
}

// openers hands each reader out once, in order.
func (o *openedCheckpoints) openers() []workspace.Opener {
	out := make([]workspace.Opener, len(o.rcs))
	for i := range o.rcs {
		out[i] = func(context.Context) (io.ReadCloser, error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			rc := o.rcs[i]
			if rc == nil {
				return nil, errors.New("checkpoint layer opened twice")
			}
			o.rcs[i] = nil
			return rc, nil
		}
	}
	return out
}

// close closes the readers the import never took.
func (o *openedCheckpoints) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, rc := range o.rcs {
		if rc != nil {
			_ = rc.Close()
			o.rcs[i] = nil
		}
	}
}

// importError is what a failed workspace import means for the request:
// an unsafe entry in a git tree is the spec's policy problem; a checkpoint
// that is not one safe, well-formed archive within the limits is corrupt.
func importError(req exechost.ProvisionRequest, err error) error {
	switch {
	case req.Workspace.Git != nil && errors.Is(err, workspace.ErrUnsafeEntry):
		return &exechost.PolicyError{Field: "workspace.git", Reason: err.Error()}
	case len(req.Workspace.Checkpoints) > 0 && !errors.Is(err, exechost.ErrCorruptCheckpoint) &&
		(errors.Is(err, workspace.ErrUnsafeEntry) || errors.Is(err, workspace.ErrTooLarge) || errors.Is(err, workspace.ErrMalformedArchive)):
		return fmt.Errorf("%w: %w", exechost.ErrCorruptCheckpoint, err)
	}
	return err
}
