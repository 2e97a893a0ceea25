package engine

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/tracing"
)

// TestTracingEnvErrors: a tracing variable agentctl cannot use is a usage
// error (exit 2) naming the variable, for the client verbs (at dial) and
// for worker and dev (before anything starts); a header value never
// appears in the message.
func TestTracingEnvErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{name: "list: endpoint without scheme", env: map[string]string{tracing.EnvEndpoint: "collector:4317"},
			args: []string{"--address", "127.0.0.1:1", "list"}, want: tracing.EnvEndpoint},
		{name: "inspect: unsupported protocol", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4318", tracing.EnvProtocol: "http/json"},
			args: []string{"--address", "127.0.0.1:1", "inspect", "x"}, want: tracing.EnvProtocol},
		{name: "worker: malformed headers", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4317", tracing.EnvHeaders: "api-key-hunter2"},
			args: []string{"worker"}, want: tracing.EnvHeaders},
		{name: "dev: sampler typo", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4317", tracing.EnvSampler: "sometimes"},
			args: []string{"dev"}, want: tracing.EnvSampler},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out, errOut bytes.Buffer
			code := Run(context.Background(), "test", tc.args, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
			require.Equal(t, ExitInvalid, code, errOut.String())
			require.Contains(t, errOut.String(), tc.want)
			require.NotContains(t, errOut.String(), "hunter2")
		})
	}
}
