package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentflow/agentflow/internal/failure"
)

// A stopping worker waits its stop timeout for running attempts, then
// hands the rest back: it closes Options.HandBack, and every running
// attempt aborts what it is doing (the host destroys the sandbox as for a
// cancellation), terminates its sandbox and fails as SandboxLost, an
// infrastructure failure that Temporal retries on another worker. The
// worker waits for those reports before it closes its Temporal client, so
// no attempt is left for the heartbeat timeout to find.

// handedBack is the cancellation cause of an attempt handed back.
type handedBack struct{ worker string }

func (h *handedBack) Error() string {
	return fmt.Sprintf("worker %s stopped before the attempt finished; handed back", h.worker)
}

// watchHandBack derives the attempt's context: canceled with a handedBack
// cause once HandBack closes. stop releases the watcher.
func (a *Activities) watchHandBack(ctx context.Context) (context.Context, func()) {
	if a.opts.HandBack == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		select {
		case <-a.opts.HandBack:
			cancel(&handedBack{worker: a.opts.Identity})
		case <-done:
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		close(done)
		cancel(nil)
	}
}

// handBackError is the attempt's failure when its context ended because
// the worker handed it back, else nil.
func handBackError(ctx context.Context) *stepError {
	var hb *handedBack
	if ctx.Err() == nil || !errors.As(context.Cause(ctx), &hb) {
		return nil
	}
	return failf(failure.SandboxLost, "%s", hb.Error())
}
