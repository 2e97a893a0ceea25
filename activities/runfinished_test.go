package activities

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentflow/agentflow/internal/metrics"
)

type hookRecorder struct {
	mu     sync.Mutex
	bodies map[string][]WebhookEvent
	keys   []string
}

func (r *hookRecorder) handler(status int) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var ev WebhookEvent
		_ = json.Unmarshal(b, &ev)
		r.mu.Lock()
		if r.bodies == nil {
			r.bodies = map[string][]WebhookEvent{}
		}
		r.bodies[req.URL.Path] = append(r.bodies[req.URL.Path], ev)
		r.keys = append(r.keys, req.Header.Get("Idempotency-Key"))
		r.mu.Unlock()
		w.WriteHeader(status)
	}
}

func runFinished(t *testing.T, a *Activities, ev RunEvent) error {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	_, err := env.ExecuteActivity(a.RunFinished, ev)
	return err
}

func TestRunFinishedDeliversWebhooksAndMetrics(t *testing.T) {
	rec := &hookRecorder{}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok/", rec.handler(http.StatusNoContent))
	mux.HandleFunc("/fail/", rec.handler(http.StatusBadGateway))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	m := metrics.New()
	a := New(Options{Host: newFakeHost(), Metrics: m, WebhookURLs: []string{srv.URL + "/ok/worker"}})
	ev := RunEvent{
		AgentID: "news-1", RunID: "run-9", Spec: "daily-tech-news", Version: "1.0.0",
		Status: "SUCCEEDED", DurationMS: 1500, Outputs: map[string]any{"n": 3.0},
		Webhooks: []string{srv.URL + "/ok/spec", srv.URL + "/ok/worker"}, // duplicate delivered once
	}
	require.NoError(t, runFinished(t, a, ev))

	require.Len(t, rec.bodies["/ok/spec"], 1)
	require.Len(t, rec.bodies["/ok/worker"], 1)
	got := rec.bodies["/ok/spec"][0]
	require.Equal(t, "run.finished", got.Event)
	require.Equal(t, "news-1", got.AgentID)
	require.Equal(t, "SUCCEEDED", got.Status)
	require.Equal(t, map[string]any{"n": 3.0}, got.Outputs)
	require.Empty(t, got.Webhooks)
	require.Equal(t, []string{"run-9", "run-9"}, rec.keys)
	require.InDelta(t, 1, testutil.ToFloat64(m.RunFinished.WithLabelValues("daily-tech-news", "succeeded")), 0)
	// The spec's other statuses exist at 0 (a failure ratio sees the first failure).
	require.Equal(t, 3, testutil.CollectAndCount(m.RunFinished))
	require.InDelta(t, 2, testutil.ToFloat64(m.WebhookDeliveries.WithLabelValues("ok")), 0)

	// A failing receiver fails the activity (so Temporal retries it); the
	// error names the host but not the path, which may be a credential.
	ev.Webhooks = []string{srv.URL + "/fail/T0KEN-PATH"}
	err := runFinished(t, New(Options{Host: newFakeHost()}), ev)
	require.Error(t, err)
	require.Contains(t, err.Error(), "status 502")
	require.NotContains(t, err.Error(), "T0KEN-PATH")

	ev.Webhooks = []string{"ftp://example.com/x"}
	require.ErrorContains(t, runFinished(t, New(Options{Host: newFakeHost()}), ev), "invalid URL")
}

func TestRunFinishedWithoutWebhooks(t *testing.T) {
	require.NoError(t, runFinished(t, New(Options{Host: newFakeHost()}), RunEvent{AgentID: "a", RunID: "r", Status: "FAILED"}))
}
