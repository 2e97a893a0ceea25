package worker

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/tracing"
)

// TestRunRefusesBadTracingEnv: a worker whose tracing variables are wrong
// does not start (and connects to nothing first).
func TestRunRefusesBadTracingEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{name: "endpoint", env: map[string]string{tracing.EnvEndpoint: "collector:4317"}, want: tracing.EnvEndpoint},
		{name: "protocol", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4317", tracing.EnvProtocol: "udp"}, want: tracing.EnvProtocol},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			err := Run(t.Context(), Config{
				Address: "127.0.0.1:1", Logger: slog.New(slog.DiscardHandler),
				CheckpointDir: t.TempDir(), LogDir: t.TempDir(),
			})
			var ce *tracing.ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tc.want, ce.Var)
		})
	}
}
