package activities

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
)

// heartbeat records an activity heartbeat every interval until stopped.
// Heartbeats are how cancellation reaches a running activity.
type heartbeat struct {
	phase atomic.Value
	done  chan struct{}
	wg    sync.WaitGroup
}

func startHeartbeat(ctx context.Context, every time.Duration) *heartbeat {
	hb := &heartbeat{done: make(chan struct{})}
	hb.phase.Store("start")
	activity.RecordHeartbeat(ctx, "start")
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
				activity.RecordHeartbeat(ctx, hb.phase.Load())
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
