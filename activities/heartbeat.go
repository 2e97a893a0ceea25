package activities

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
)

// heartbeat records an activity heartbeat at once and then every interval
// until stopped. Heartbeats are how cancellation reaches a running
// activity. Each carries the attempt's phase and the worker's identity:
// when the worker dies, the last heartbeat is all the workflow learns of
// where and on whom (attempts.go reads both from the timeout).
//
// The first one is sent from the heartbeat's goroutine, not the step's:
// the SDK sends an activity's first heartbeat synchronously, so calling it
// inline made every step wait one server round trip, which grows with the
// server's load, before provisioning. The step's activity still completes
// only after it is answered (the SDK's completion waits for an in-flight
// heartbeat), but the round trip now overlaps the step's work; a step
// that ends before the goroutine runs sends none (DECISIONS 248).
type heartbeat struct {
	phase  atomic.Value
	worker string
	done   chan struct{}
	wg     sync.WaitGroup
}

func startHeartbeat(ctx context.Context, every time.Duration, worker string) *heartbeat {
	hb := &heartbeat{done: make(chan struct{}), worker: worker}
	hb.phase.Store("start")
	hb.wg.Add(1)
	go func() {
		defer hb.wg.Done()
		select {
		case <-hb.done: // the step ended first: nothing to report
			return
		default:
		}
		activity.RecordHeartbeat(ctx, hb.phase.Load(), hb.worker)
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
