package hosttest

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/agentflow/agentflow/exechost"
)

// The Fake has no network: a NetworkEgress request that passes validation
// gets a sandbox like any other, and the Fake remembers its policy.
// Connections are what a test says happened: EmitEgress delivers an event
// through the policy's Events as a host's boundary would, and never once
// the sandbox has ended (Terminate, a kill, the deadline or a limit), so
// code under test sees the contract's "never after Terminate returned".

// Egress returns a copy of the egress policy the latest sandbox of id was
// provisioned with, live or ended, or nil (network none, or an ID never
// provisioned). Header values are the final ones the host was given. The
// copy's Events is nil: deliver events with EmitEgress.
func (f *Fake) Egress(id exechost.ExecutionID) *exechost.EgressPolicy {
	f.mu.Lock()
	defer f.mu.Unlock()
	return copyEgressPolicy(f.egress[id])
}

// EmitEgress delivers ev to the Events of id's egress policy, on the
// caller's goroutine, as the host's boundary reports a connection that
// ended or was refused (Time is set to now when zero). Deliveries to one
// sandbox are serialised; ending the sandbox waits for one in progress.
// An Events receiver must therefore not terminate its own sandbox.
//
// It returns exechost.ErrTerminated once the sandbox ended (the event is
// not delivered), exechost.ErrNotFound for an unknown ID, and an error for
// a sandbox without network egress. A policy without Events drops ev.
func (f *Fake) EmitEgress(id exechost.ExecutionID, ev exechost.EgressEvent) error {
	f.mu.Lock()
	e, ok := f.execs[id]
	ended := f.gone[id]
	_, egress := f.egress[id]
	f.mu.Unlock()
	switch {
	case !ok && ended:
		return fmt.Errorf("egress event for %s: %w", id, exechost.ErrTerminated)
	case !ok:
		return fmt.Errorf("egress event for %s: %w", id, exechost.ErrNotFound)
	case !egress:
		return fmt.Errorf("egress event for %s: the sandbox has network none", id)
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	e.evMu.Lock()
	defer e.evMu.Unlock()
	if e.evDone {
		return fmt.Errorf("egress event for %s: %w", id, exechost.ErrTerminated)
	}
	if e.events != nil {
		e.events(ev)
	}
	return nil
}

// copyEgressPolicy deep-copies p without its Events (nil for nil).
func copyEgressPolicy(p *exechost.EgressPolicy) *exechost.EgressPolicy {
	if p == nil {
		return nil
	}
	c := *p
	c.Events = nil
	c.Rules = slices.Clone(p.Rules)
	for i := range c.Rules {
		c.Rules[i].Headers = maps.Clone(c.Rules[i].Headers)
	}
	return &c
}
