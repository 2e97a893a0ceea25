package activities

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
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

// A running attempt is counted while it runs (what the stuck-step gauges
// are computed from) and no longer once RunStep returns, whatever the
// outcome.
func TestRunStepCountsRunningAttempts(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(map[bool]string{false: "success", true: "failure"}[fail], func(t *testing.T) {
			h := newHarness(t)
			var during float64
			h.host.exec = func(context.Context, exechost.ExecRequest) (*exechost.ExecResult, error) {
				during = gaugeValue(t, h.metrics, "agentflow_step_attempts_running")
				if fail {
					return &exechost.ExecResult{ExitCode: 2}, nil
				}
				return &exechost.ExecResult{Stdout: []byte(`{"ok":true}`)}, nil
			}
			_, err := h.run(t, baseReq())
			require.Equal(t, fail, err != nil, "err %v", err)
			require.InDelta(t, 1, during, 0)
			require.InDelta(t, 0, gaugeValue(t, h.metrics, "agentflow_step_attempts_running"), 0)
			require.InDelta(t, 0, gaugeValue(t, h.metrics, "agentflow_step_attempts_overdue"), 0)
		})
	}
}

func gaugeValue(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
