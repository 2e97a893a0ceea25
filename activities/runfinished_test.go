package activities

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentflow/agentflow/internal/metrics"
	"github.com/agentflow/agentflow/webhook"
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

// signedRecorder records every delivery's raw body and headers.
type signedRecorder struct {
	mu      sync.Mutex
	status  []int // answer of the n-th request (then 204)
	got     []http.Header
	bodies  [][]byte
	targets []string
}

func (r *signedRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	n := len(r.got)
	r.got = append(r.got, req.Header.Clone())
	r.bodies = append(r.bodies, b)
	r.targets = append(r.targets, req.URL.Path)
	status := http.StatusNoContent
	if n < len(r.status) {
		status = r.status[n]
	}
	r.mu.Unlock()
	w.WriteHeader(status)
}

// runFinishedAttempt runs one attempt of RunFinished as a retry would: with
// the heartbeat details the previous attempt recorded.
func runFinishedAttempt(t *testing.T, a *Activities, ev RunEvent, delivered []string) error {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	if delivered != nil {
		env.SetHeartbeatDetails(delivered)
	}
	_, err := env.ExecuteActivity(a.RunFinished, ev)
	return err
}

func TestRunFinishedSignsEveryDeliveryAfresh(t *testing.T) {
	secret := []byte("a-shared-secret-of-32-bytes-----")
	rec := &signedRecorder{status: []int{http.StatusServiceUnavailable}}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)

	m := metrics.New()
	a := New(Options{Host: newFakeHost(), Metrics: m, WebhookSecret: secret,
		WebhookURLs: []string{srv.URL + "/worker"}})
	clock := time.Unix(1_800_000_000, 0)
	a.now = func() time.Time { return clock }
	ev := RunEvent{AgentID: "a", RunID: "run-1", Spec: "s", Status: "CANCELED", Webhooks: []string{srv.URL + "/spec"}}

	// Attempt 1: /spec answers 503, /worker 204.
	err := runFinishedAttempt(t, a, ev, nil)
	require.ErrorContains(t, err, "status 503")
	require.InDelta(t, 1, testutil.ToFloat64(m.WebhookDeliveries.WithLabelValues("error")), 0)
	require.InDelta(t, 1, testutil.ToFloat64(m.WebhookDeliveries.WithLabelValues("ok")), 0)

	// Attempt 2, a minute later, knows /worker was delivered (its tag in
	// the heartbeat details): only /spec is posted again, with a new
	// timestamp and signature.
	clock = clock.Add(time.Minute)
	require.NoError(t, runFinishedAttempt(t, a, ev, []string{targetTag("run-1", srv.URL+"/worker")}))
	require.Equal(t, []string{"/spec", "/worker", "/spec"}, rec.targets)

	for i, h := range rec.got {
		require.NoError(t, webhook.Verify(secret, h, rec.bodies[i], clock, 0), "delivery %d", i)
		require.Equal(t, "run-1", h.Get(webhook.HeaderIdempotencyKey))
		var body WebhookEvent
		require.NoError(t, json.Unmarshal(rec.bodies[i], &body))
		require.Equal(t, "CANCELED", body.Status)
	}
	require.NotEqual(t, rec.got[0].Get(webhook.HeaderTimestamp), rec.got[2].Get(webhook.HeaderTimestamp))
	require.NotEqual(t, rec.got[0].Get(webhook.HeaderSignature), rec.got[2].Get(webhook.HeaderSignature))
	require.ErrorIs(t, webhook.Verify([]byte("another-secret-0123456"), rec.got[2], rec.bodies[2], clock, 0), webhook.ErrBadSignature)
}

func TestRunFinishedWithoutSecretIsUnsigned(t *testing.T) {
	rec := &signedRecorder{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	a := New(Options{Host: newFakeHost(), WebhookURLs: []string{srv.URL + "/h"}})
	require.NoError(t, runFinishedAttempt(t, a, RunEvent{AgentID: "a", RunID: "r", Status: "SUCCEEDED"}, nil))
	require.Len(t, rec.got, 1)
	require.Empty(t, rec.got[0].Get(webhook.HeaderSignature))
	require.Empty(t, rec.got[0].Get(webhook.HeaderTimestamp))
}

func TestRunFinishedFailuresCountedNotEchoed(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close() // connection refused
	tests := []struct {
		name    string
		target  string
		wantErr string
	}{
		{name: "invalid scheme", target: "ftp://user:T0KEN@example.com/x", wantErr: "invalid URL"},
		{name: "not a URL", target: "http://[::1/T0KEN", wantErr: "invalid URL"},
		{name: "refused", target: closed.URL + "/hook/T0KEN?sig=T0KEN", wantErr: "webhook http://"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.New()
			a := New(Options{Host: newFakeHost(), Metrics: m, WebhookSecret: []byte("0123456789abcdef"),
				WebhookURLs: []string{tc.target}})
			err := runFinishedAttempt(t, a, RunEvent{AgentID: "a", RunID: "r", Status: "FAILED"}, nil)
			require.ErrorContains(t, err, tc.wantErr)
			require.NotContains(t, err.Error(), "T0KEN")
			require.InDelta(t, 1, testutil.ToFloat64(m.WebhookDeliveries.WithLabelValues("error")), 0)
		})
	}
}
