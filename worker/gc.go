package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/agentflow/agentflow/internal/gc"
)

// DefaultGCOlderThan is the retention of worker --gc-every and agentctl gc
// when --gc-older-than / --older-than is not given.
const DefaultGCOlderThan = 30 * 24 * time.Hour

// gcStores are the worker's stores as gc sees them.
func (s *Stores) gcStores() gc.Stores {
	return gc.Stores{Checkpoints: s.Checkpoints, Logs: s.Logs, Results: s.Results}
}

// startGC runs a collection every cfg.GCEvery (nothing when it is zero)
// until ctx ends; wg tracks the loop. The first collection waits one
// interval: a worker that restarts in a loop does not scan the store each
// time. Several workers on one shared store may all collect: deletions are
// idempotent, and each only removes what every one of them would.
func startGC(ctx context.Context, wg *sync.WaitGroup, cfg Config, c client.Client, dc converter.DataConverter, stores *Stores, log *slog.Logger) {
	if cfg.GCEvery <= 0 {
		return
	}
	runs := &gc.Temporal{Client: c, Namespace: cfg.Namespace, Converter: dc}
	warnRetention(ctx, runs, cfg.GCOlderThan, log)
	every(ctx, wg, cfg.GCEvery, func() {
		_, err := gc.Collect(ctx, runs, stores.gcStores(), gc.Options{OlderThan: cfg.GCOlderThan, Logger: log})
		if err != nil && ctx.Err() == nil {
			log.Warn("gc", "error", err)
		}
	})
}

// warnRetention says when runs leave Temporal before gc may collect them:
// their objects are then never attributed (DECISIONS 209).
func warnRetention(ctx context.Context, runs *gc.Temporal, olderThan time.Duration, log *slog.Logger) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ret, err := runs.Retention(rctx)
	if err != nil {
		log.Warn("gc: read the namespace's retention", "error", err)
		return
	}
	if ret > 0 && olderThan >= ret {
		log.Warn("gc: --gc-older-than is not shorter than the namespace's retention; runs Temporal forgets first keep their checkpoints and logs",
			"older_than", olderThan, "namespace_retention", ret)
	}
}
