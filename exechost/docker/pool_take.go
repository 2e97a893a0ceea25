package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/docker/docker/errdefs"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker/policy"
)

// The host's side of the warm pool (pool.go): the key of a request, taking
// and assigning a pooled sandbox, Drain and the pool's numbers.

// poolKey is the key of req's template on image imageID: a hash of the
// container configuration a cold sandbox of it would get, minus the
// per-execution parts (PoolTemplate leaves them out).
func (h *Host) poolKey(req exechost.ProvisionRequest, imageID string) string {
	spec := h.spec(policy.PoolTemplate(req), policy.Meta{Owner: h.owner, ImageID: imageID})
	b, _ := json.Marshal([]any{spec.Config, spec.HostConfig})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// takePooled returns a started sandbox for req from the pool, renamed to
// the execution's container name and recorded on e, or "" (a miss, or a
// pooled sandbox that could not be assigned: the caller provisions cold).
func (h *Host) takePooled(ctx context.Context, e *execution, req exechost.ProvisionRequest, imageID string) string {
	if h.pool == nil || !h.pool.poolable(req) {
		return ""
	}
	m := h.pool.take(req, imageID)
	if m == nil {
		return ""
	}
	h.mu.Lock()
	e.poolSlot = m.slot
	e.containerID = m.containerID
	h.mu.Unlock()
	e.launch.Store(m.launch)
	h.pool.release(m)
	err := h.rename(ctx, req.ExecutionID, m.containerID, policy.ContainerName(req.ExecutionID))
	if err != nil {
		h.mu.Lock()
		e.poolSlot, e.containerID = "", ""
		h.mu.Unlock()
		e.launch.Swap(nil).Close()
		h.remove(context.WithoutCancel(ctx), m.containerID)
		h.log.Warn("sandbox pool: assign failed, provisioning cold", "execution_id", req.ExecutionID,
			"container_id", m.containerID, "error", err)
		return ""
	}
	return m.containerID
}

// rename gives a taken pooled sandbox the execution's name, replacing a
// leftover of an earlier delivery of the same execution as create does.
func (h *Host) rename(ctx context.Context, execID exechost.ExecutionID, id, name string) error {
	for attempt := 0; ; attempt++ {
		err := h.c.ContainerRename(ctx, id, name)
		if err == nil || attempt > 0 {
			return err
		}
		if !errdefs.IsConflict(err) {
			return err
		}
		if err := h.replaceLeftover(ctx, execID, name); err != nil {
			return err
		}
	}
}

// Drain stops the warm pool and removes every pooled sandbox; sandboxes of
// executions are not touched. Provisions after it run cold. The worker
// calls it when it stops; a host without a pool returns nil.
func (h *Host) Drain(ctx context.Context) error {
	if h.pool == nil {
		return nil
	}
	return h.pool.drain(ctx)
}

// PoolStats reports the warm pool's takes and idle sandboxes (zero without
// a pool).
func (h *Host) PoolStats() PoolStats {
	if h.pool == nil {
		return PoolStats{}
	}
	return h.pool.stats()
}
