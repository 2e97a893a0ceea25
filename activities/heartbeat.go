package activities

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
)

// heartbeat records an activity heartbeat every interval until stopped.
// Heartbeats are how cancellation reaches a running activity. Each carries
// the attempt's phase and the worker's identity: when the worker dies, the
// last heartbeat is all the workflow learns of where and on whom
// (attempts.go reads both from the timeout).
type heartbeat struct {
	phase  atomic.Value
	worker string
	done   chan struct{}
	wg     sync.WaitGroup
}

func startHeartbeat(ctx context.Context, every time.Duration, worker string) *heartbeat {
	hb := &heartbeat{done: make(chan struct{}), worker: worker}
	hb.phase.Store("start")
	activity.RecordHeartbeat(ctx, "start", worker)
	hb.wg.Add(1)
	go func() {
		defer hb.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-hb.done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, hb.phase.Load(), hb.worker)
			}
		}
	}()
	return hb
}

func (hb *heartbeat) setPhase(p string) { hb.phase.Store(p) }

func (hb *heartbeat) stop() {
	close(hb.done)
	hb.wg.Wait()
}
