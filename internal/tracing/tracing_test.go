package tracing_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/agentflow/agentflow/internal/tracing"
	"github.com/agentflow/agentflow/internal/tracing/tracingtest"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestSetupConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		enabled bool
		errVar  string // the *ConfigError's variable; "" = no error
		notIn   string // never in the error message
	}{
		{name: "no endpoint is off", env: map[string]string{}},
		{name: "sdk disabled", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4317", tracing.EnvSDKDisabled: "true"}},
		{name: "exporter none", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4317", tracing.EnvTracesExporter: "none"}},
		{name: "exporter zipkin refused", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4317", tracing.EnvTracesExporter: "zipkin"}, errVar: tracing.EnvTracesExporter},
		{name: "endpoint grpc", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4317", tracing.EnvProtocol: "grpc"}, enabled: true},
		{name: "endpoint default protocol", env: map[string]string{tracing.EnvEndpoint: "https://collector.example:4318"}, enabled: true},
		{name: "traces endpoint alone", env: map[string]string{tracing.EnvTracesEndpoint: "http://127.0.0.1:4318/v1/traces"}, enabled: true},
		{name: "traces protocol wins", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4317", tracing.EnvProtocol: "bogus", tracing.EnvTracesProtocol: "grpc"}, enabled: true},
		{name: "http/json refused", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4318", tracing.EnvProtocol: "http/json"}, errVar: tracing.EnvProtocol},
		{name: "endpoint without scheme", env: map[string]string{tracing.EnvEndpoint: "127.0.0.1:4317"}, errVar: tracing.EnvEndpoint},
		{
			name:   "endpoint with credentials not echoed",
			env:    map[string]string{tracing.EnvTracesEndpoint: "ftp://user:hunter2@collector"},
			errVar: tracing.EnvTracesEndpoint, notIn: "hunter2",
		},
		{
			name:   "malformed header not echoed",
			env:    map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4317", tracing.EnvHeaders: "x-ok=1,api-key-hunter2"},
			errVar: tracing.EnvHeaders, notIn: "hunter2",
		},
		{
			name:   "header value badly escaped, not echoed",
			env:    map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4317", tracing.EnvTracesHeaders: "authorization=Bearer%zzhunter2"},
			errVar: tracing.EnvTracesHeaders, notIn: "hunter2",
		},
		{name: "headers ok", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4317", tracing.EnvHeaders: "authorization=Bearer%20x, x-team = a"}, enabled: true},
		{name: "sampler ratio", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4317", tracing.EnvSampler: "parentbased_traceidratio", tracing.EnvSamplerArg: "0.25"}, enabled: true},
		{name: "sampler always_off still exports nothing but is on", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4317", tracing.EnvSampler: "always_off"}, enabled: true},
		{name: "sampler typo", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4317", tracing.EnvSampler: "alwayson"}, errVar: tracing.EnvSampler},
		{name: "sampler ratio out of range", env: map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4317", tracing.EnvSampler: "traceidratio", tracing.EnvSamplerArg: "2"}, errVar: tracing.EnvSamplerArg},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tracing.Setup(t.Context(), tracing.Options{ServiceName: "test", Getenv: env(tc.env)})
			if tc.errVar != "" {
				var ce *tracing.ConfigError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, tc.errVar, ce.Var)
				if tc.notIn != "" {
					require.NotContains(t, err.Error(), tc.notIn)
				}
				return
			}
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
			require.Equal(t, tc.enabled, p.Enabled())
			ics, err := p.ClientInterceptors()
			require.NoError(t, err)
			if tc.enabled {
				require.Len(t, ics, 1, "the Temporal tracing interceptor")
			} else {
				require.Empty(t, ics, "off adds no interceptor")
			}
		})
	}
}

// TestOffIsNoop: the disabled provider's tracer records nothing and a nil
// provider is usable.
func TestOffIsNoop(t *testing.T) {
	for name, p := range map[string]*tracing.Provider{"off": tracing.Off(), "nil": nil} {
		t.Run(name, func(t *testing.T) {
			_, span := p.Tracer().Start(t.Context(), "x")
			require.False(t, span.SpanContext().IsValid())
			require.False(t, span.IsRecording())
			span.End()
			require.NoError(t, p.Shutdown(t.Context()))
		})
	}
}

// TestExportsOverOTLP exports through the real OTLP exporters, configured
// by the standard variables only, to a real receiver over both protocols.
func TestExportsOverOTLP(t *testing.T) {
	rcv := tracingtest.Start(t)
	tests := []struct {
		protocol string
		endpoint string
		wire     string
	}{
		{protocol: tracing.ProtocolGRPC, endpoint: rcv.GRPCEndpoint, wire: "grpc"},
		{protocol: tracing.ProtocolHTTPProtobuf, endpoint: rcv.HTTPEndpoint, wire: "http"},
	}
	for _, tc := range tests {
		t.Run(tc.protocol, func(t *testing.T) {
			// The exporters read the process environment themselves.
			t.Setenv(tracing.EnvEndpoint, tc.endpoint)
			t.Setenv(tracing.EnvProtocol, tc.protocol)
			t.Setenv(tracing.EnvHeaders, "x-agentflow-test="+tc.wire)
			t.Setenv(tracing.EnvServiceName, "svc-"+tc.wire)
			p, err := tracing.Setup(t.Context(), tracing.Options{ServiceName: "ignored"})
			require.NoError(t, err)
			require.True(t, p.Enabled())

			ctx, parent := p.Tracer().Start(t.Context(), "parent-"+tc.wire)
			_, child := p.Tracer().Start(ctx, "child-"+tc.wire)
			child.SetAttributes(attribute.String("k", "v"))
			child.End()
			parent.End()
			require.NoError(t, p.Shutdown(t.Context()), "shutdown flushes")

			spans := rcv.Spans()
			ps := tracingtest.Named(spans, "parent-"+tc.wire)
			cs := tracingtest.Named(spans, "child-"+tc.wire)
			require.Len(t, ps, 1)
			require.Len(t, cs, 1)
			require.Equal(t, ps[0].TraceID, cs[0].TraceID)
			require.Equal(t, ps[0].SpanID, cs[0].ParentSpanID)
			require.Empty(t, ps[0].ParentSpanID)
			require.Equal(t, "v", cs[0].Attributes["k"])
			require.Equal(t, "svc-"+tc.wire, cs[0].Service, "OTEL_SERVICE_NAME wins")
			require.Equal(t, tc.wire, cs[0].Protocol)
			var sawHeader bool
			for _, h := range rcv.Headers() {
				sawHeader = sawHeader || h["x-agentflow-test"] == tc.wire
			}
			require.True(t, sawHeader, "OTEL_EXPORTER_OTLP_HEADERS reached the receiver")
		})
	}
}

// TestShutdownIsBounded: a collector that is not there does not hold the
// process. The exporter alone would retry the queued span for a minute
// (its default retry budget, and OTEL_EXPORTER_OTLP_TIMEOUT at 60 s);
// Shutdown gives up after ShutdownTimeout, on any context.
func TestShutdownIsBounded(t *testing.T) {
	t.Setenv(tracing.EnvEndpoint, "http://127.0.0.1:1") // nothing listens on port 1
	t.Setenv(tracing.EnvProtocol, tracing.ProtocolGRPC)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "60000")
	p, err := tracing.Setup(t.Context(), tracing.Options{ServiceName: "test"})
	require.NoError(t, err)
	_, span := p.Tracer().Start(t.Context(), "lost")
	span.End()
	done := make(chan error, 1)
	go func() { done <- p.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		require.Error(t, err, "the span was not delivered")
		require.Contains(t, err.Error(), "flush traces to http://127.0.0.1:1")
	case <-time.After(45 * time.Second): // far above ShutdownTimeout, below the exporter's own minute
		t.Fatal("Shutdown is not bounded by ShutdownTimeout")
	}
}
