package worker

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/metrics"
)

// healthTimeout bounds each dependency check, so a hung daemon makes
// /healthz answer 503 instead of hanging the prober.
const healthTimeout = 3 * time.Second

// HealthStatus is the /healthz body.
type HealthStatus struct {
	Status   string            `json:"status"`           // ok | unavailable
	Failures map[string]string `json:"failed,omitempty"` // dependency → error
}

// TemporalChecker is the part of client.Client /healthz needs.
type TemporalChecker interface {
	CheckHealth(ctx context.Context, req *client.CheckHealthRequest) (*client.CheckHealthResponse, error)
}

// HealthHandler answers 200 {"status":"ok"} only when Temporal (CheckHealth)
// and the sandbox daemon (ping) both answer; otherwise 503 naming which
// failed. Both are checked on every request, concurrently.
//
// The object store (--store) is not checked, on purpose: every worker
// shares it, so a store blip would fail every worker's health at once and
// an orchestrator would restart (a balancer drain) all of them for an
// outage none can fix, killing steps that were not touching the store. The
// attempts that do touch it fail as StoreUnavailable and are retried as
// infrastructure failures; the attempt failure metrics show the outage.
func HealthHandler(temporal TemporalChecker, ping func(context.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		type result struct {
			name string
			err  error
		}
		results := make(chan result, 2) // buffered: no goroutine outlives a slow check
		go func() {
			_, err := temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
			results <- result{"temporal", err}
		}()
		go func() {
			var err error
			if ping != nil {
				err = ping(ctx)
			}
			results <- result{"docker", err}
		}()
		st := HealthStatus{Status: "ok"}
		for range 2 {
			res := <-results
			if res.err != nil {
				if st.Failures == nil {
					st.Failures = map[string]string{}
				}
				st.Failures[res.name] = res.err.Error()
			}
		}
		code := http.StatusOK
		if len(st.Failures) > 0 {
			st.Status = "unavailable"
			code = http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(st)
	})
}

// MetricsHandler serves the worker's registry (agentflow, Go runtime,
// process and Temporal SDK metrics).
func MetricsHandler(m *metrics.Metrics) http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}
