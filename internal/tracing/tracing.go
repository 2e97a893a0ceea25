// Package tracing sets up OpenTelemetry traces for agentctl and the worker
// from the standard OTEL_* environment: an OTLP exporter (grpc or
// http/protobuf) batching to the configured endpoint, and the Temporal
// SDK's tracing interceptor, which carries the trace context from the
// client that starts a run through workflow and activity headers. With no
// endpoint configured it is off: a no-op provider, no interceptor, nothing
// exported, no cost beyond an interface call per span.
//
// Spans of our own (the step attempt and its sandbox phases) are opened
// in activities; this package only provides the tracer.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// ShutdownTimeout bounds the final flush: a process that stops must not
// hang on an unreachable collector (the spans still queued are lost).
const ShutdownTimeout = 5 * time.Second

// InstrumentationName names the tracer of agentflow's own spans.
const InstrumentationName = "github.com/agentflow/agentflow"

// Options configure Setup.
type Options struct {
	// ServiceName is service.name unless OTEL_SERVICE_NAME sets it.
	ServiceName string
	// Logger receives export errors (the OpenTelemetry error handler is
	// process-wide: the last Setup that enables tracing wins). nil: discarded.
	Logger *slog.Logger
	// Getenv reads the environment (nil: os.Getenv). The OTLP exporters
	// read their own variables from the process environment regardless.
	Getenv func(string) string
}

// Provider is the process's tracing: on (an SDK provider exporting over
// OTLP) or off (no-op). The zero value and a nil *Provider are off.
type Provider struct {
	tp  trace.TracerProvider
	sdk *sdktrace.TracerProvider
	cfg config
}

// Off is a disabled provider.
func Off() *Provider { return &Provider{} }

// Setup configures tracing from the standard environment. An invalid
// variable is a *ConfigError; no endpoint is Off, not an error.
func Setup(ctx context.Context, opts Options) (*Provider, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg, err := parseConfig(getenv)
	if err != nil {
		return nil, err
	}
	if !cfg.enabled {
		return Off(), nil
	}
	var exp sdktrace.SpanExporter
	switch cfg.protocol {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx)
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("otlp %s exporter: %w", cfg.protocol, err)
	}
	res, err := newResource(ctx, opts.ServiceName, getenv)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, err
	}
	if opts.Logger != nil {
		log := opts.Logger
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("tracing: export", "error", err)
		}))
	}
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(cfg.sampler),
	)
	return &Provider{tp: sdk, sdk: sdk, cfg: cfg}, nil
}

// CheckEnv reports a tracing variable the process could not start with
// (a *ConfigError), without setting anything up: for commands that check
// their configuration before they start (exit 2).
func CheckEnv(getenv func(string) string) error {
	_, err := parseConfig(getenv)
	return err
}

// newResource is service.name (ours, or OTEL_SERVICE_NAME) plus
// OTEL_RESOURCE_ATTRIBUTES and the SDK's own attributes.
func newResource(ctx context.Context, service string, getenv func(string) string) (*resource.Resource, error) {
	if v := getenv(EnvServiceName); v != "" {
		service = v
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_RESOURCE_ATTRIBUTES (and OTEL_SERVICE_NAME from the process)
		resource.WithAttributes(attribute.String("service.name", service)),
	)
	if err != nil {
		return nil, &ConfigError{Var: "OTEL_RESOURCE_ATTRIBUTES", Msg: err.Error()}
	}
	return res, nil
}

// Enabled reports whether spans are exported.
func (p *Provider) Enabled() bool { return p != nil && p.sdk != nil }

// Tracer is the tracer of agentflow's own spans (no-op when off).
func (p *Provider) Tracer() trace.Tracer {
	if !p.Enabled() {
		return noop.NewTracerProvider().Tracer(InstrumentationName)
	}
	return p.tp.Tracer(InstrumentationName)
}

// LogValue describes the configuration for the start-up log line: the
// endpoint without credentials, never a header.
func (p *Provider) LogValue() slog.Value {
	if !p.Enabled() {
		return slog.StringValue("off (no OTEL_EXPORTER_OTLP_ENDPOINT)")
	}
	return slog.GroupValue(
		slog.String("endpoint", p.cfg.endpoint),
		slog.String("protocol", p.cfg.protocol),
		slog.String("sampler", p.cfg.samplerName),
	)
}

// ClientInterceptors are the Temporal client interceptors to add: the
// SDK's OpenTelemetry tracing interceptor when on, none when off (off
// costs nothing, not even header propagation). A worker built on the
// client inherits them, so the same call wires client and worker.
// Query tracing is off: agentctl --wait polls the status query, and a
// trace per poll would bury the run's trace.
func (p *Provider) ClientInterceptors() ([]interceptor.ClientInterceptor, error) {
	if !p.Enabled() {
		return nil, nil
	}
	ic, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer:              p.tp.Tracer("go.temporal.io/sdk"),
		TextMapPropagator:   propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		DisableQueryTracing: true,
	})
	if err != nil {
		return nil, fmt.Errorf("temporal tracing interceptor: %w", err)
	}
	return []interceptor.ClientInterceptor{ic}, nil
}

// Shutdown flushes the spans still queued and stops the exporter, within
// ShutdownTimeout whatever ctx says (it runs when the process is stopping,
// often on a canceled context). Nil-safe; off is a no-op.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	if err := p.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces to %s: %w", p.cfg.endpoint, err)
	}
	return nil
}
