package worker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/metrics"
)

type fakeTemporal struct{ err error }

func (f fakeTemporal) CheckHealth(context.Context, *client.CheckHealthRequest) (*client.CheckHealthResponse, error) {
	return &client.CheckHealthResponse{}, f.err
}

func TestHealthHandler(t *testing.T) {
	down := errors.New("connection refused")
	tests := []struct {
		name        string
		temporalErr error
		dockerErr   error
		wantCode    int
		wantFailed  []string
	}{
		{name: "both up", wantCode: http.StatusOK},
		{name: "temporal down", temporalErr: down, wantCode: http.StatusServiceUnavailable, wantFailed: []string{"temporal"}},
		{name: "docker down", dockerErr: down, wantCode: http.StatusServiceUnavailable, wantFailed: []string{"docker"}},
		{name: "both down", temporalErr: down, dockerErr: down, wantCode: http.StatusServiceUnavailable, wantFailed: []string{"docker", "temporal"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := HealthHandler(fakeTemporal{tc.temporalErr}, func(context.Context) error { return tc.dockerErr })
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			require.Equal(t, tc.wantCode, rec.Code)
			var st HealthStatus
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &st))
			if tc.wantCode == http.StatusOK {
				require.JSONEq(t, `{"status":"ok"}`, rec.Body.String())
				return
			}
			require.Equal(t, "unavailable", st.Status)
			var failed []string
			for k, v := range st.Failures {
				failed = append(failed, k)
				require.Equal(t, down.Error(), v)
			}
			require.ElementsMatch(t, tc.wantFailed, failed)
		})
	}
}

func TestMetricsHandlerServesRegistry(t *testing.T) {
	m := metrics.New()
	m.ReapedSandboxes.Add(3)
	m.TemporalHandler().Counter(metrics.RunStartedTotal).Inc(1)
	rec := httptest.NewRecorder()
	MetricsHandler(m).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	body := rec.Body.String()
	require.Contains(t, body, "agentflow_sandbox_reaped_total 3")
	require.Contains(t, body, "agentflow_run_started_total 1")
	require.True(t, strings.Contains(body, "go_goroutines"))
}
