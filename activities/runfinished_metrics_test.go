package activities

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/metrics"
)

// The run metrics carry the seed's lower-case statuses, and every failed
// delivery is counted under result="error" (what the webhook alert reads).
func TestRunFinishedMetricsLabels(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)

	tests := []struct {
		status, want string
	}{
		{"SUCCEEDED", "succeeded"},
		{"FAILED", "failed"},
		{"CANCELED", "canceled"},
	}
	for _, tc := range tests {
		t.Run(tc.status, func(t *testing.T) {
			m := metrics.New()
			a := New(Options{Host: newFakeHost(), Metrics: m, WebhookURLs: []string{srv.URL + "/hook"}})
			err := runFinished(t, a, RunEvent{AgentID: "a", RunID: "r", Spec: "news", Status: tc.status, DurationMS: 300_000})
			require.ErrorContains(t, err, "status 502")
			require.InDelta(t, 1, testutil.ToFloat64(m.RunFinished.WithLabelValues("news", tc.want)), 0)
			require.InDelta(t, 1, testutil.ToFloat64(m.WebhookDeliveries.WithLabelValues(metrics.WebhookError)), 0)
			require.InDelta(t, 0, testutil.ToFloat64(m.WebhookDeliveries.WithLabelValues(metrics.WebhookOK)), 0)
		})
	}
}
