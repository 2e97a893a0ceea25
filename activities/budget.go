package activities

import "time"

// The time budget of one tool-step attempt. The compiled Plan carries each
// tool step's timeout (internal/spec fills in the default); everything
// else is derived from it here, by the workflow (activity options) and by
// RunStep (exec deadline, sandbox runtime) alike, so the two cannot drift.
const (
	// BudgetMargin is what an attempt needs besides the tool's own run:
	// provision the sandbox, restore the workspace (a git revision or a few
	// checkpoint layers of at most the disk limit), checkpoint and
	// terminate. Two minutes covers that on a loaded single machine.
	BudgetMargin = 2 * time.Minute
	// HeartbeatTimeout detects a dead worker long before StartToClose;
	// RunStep heartbeats every DefaultHeartbeatInterval through every
	// sandbox phase.
	HeartbeatTimeout = 20 * time.Second
)

// Budget is the time budget of one attempt of a tool step.
type Budget struct {
	// ToolDeadline is the tool's own exec deadline (the step timeout),
	// enforced by the execution host: a tool over it is a ToolTimeout.
	ToolDeadline time.Duration
	// StartToClose is the activity's StartToCloseTimeout: the whole
	// attempt. Firing means the worker itself is lost.
	StartToClose time.Duration
	// Heartbeat is the activity's HeartbeatTimeout.
	Heartbeat time.Duration
	// SandboxRuntime is the sandbox's whole life (provision, restore,
	// exec, checkpoint), after which the host destroys it even with no
	// worker alive. It equals StartToClose: a sandbox never outlives the
	// attempt that owns it, and the attempt never waits for a sandbox the
	// host has already expired.
	SandboxRuntime time.Duration
}

// BudgetFor derives an attempt's budget from the step timeout, which must
// be positive (the workflow fails a Plan whose tool step has none, and
// RunStep refuses such a request).
func BudgetFor(timeout time.Duration) Budget {
	return Budget{
		ToolDeadline:   timeout,
		StartToClose:   timeout + BudgetMargin,
		Heartbeat:      HeartbeatTimeout,
		SandboxRuntime: timeout + BudgetMargin,
	}
}
