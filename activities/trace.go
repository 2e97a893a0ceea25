package activities

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentflow/agentflow/internal/failure"
)

// Span names and attribute keys of RunStep's spans (docs/DEPLOY.md lists
// them for operators). Attributes identify the attempt; they never carry
// a secret, an input or an output.
const (
	SpanAttempt     = "agentflow.step_attempt"
	SpanPhasePrefix = "sandbox." // + metrics.Phase*: sandbox.provision, …

	AttrAgentID     = "agentflow.agent_id"
	AttrRunID       = "agentflow.run_id"
	AttrStepID      = "agentflow.step_id"
	AttrAttempt     = "agentflow.attempt"
	AttrTool        = "agentflow.tool"
	AttrImage       = "agentflow.image"
	AttrImageDigest = "agentflow.image_digest"
	AttrExecution   = "agentflow.execution_id"
	AttrWorker      = "agentflow.worker"
	AttrPhase       = "agentflow.phase"
	AttrFailure     = "agentflow.failure"
	AttrAdoptedFrom = "agentflow.adopted_from"
	AttrExitCode    = "agentflow.exit_code"
)

// startSpan opens the attempt's span, a child of the Temporal
// interceptor's RunActivity span when tracing is on (no-op otherwise).
func (at *attempt) startSpan(ctx context.Context) context.Context {
	req := at.req
	ctx, at.span = at.a.tracer.Start(ctx, SpanAttempt, trace.WithAttributes(
		attribute.String(AttrAgentID, req.AgentID),
		attribute.String(AttrRunID, req.RunID),
		attribute.String(AttrStepID, req.StepID),
		attribute.Int(AttrAttempt, int(at.number)),
		attribute.String(AttrTool, toolName(req)),
		attribute.String(AttrImage, req.Image),
		attribute.String(AttrExecution, string(at.id)),
		attribute.String(AttrWorker, at.a.opts.Identity),
	))
	return ctx
}

// phase opens one sandbox phase (metrics.Phase*) and returns the context
// to run it on and its end. end records the phase metric and ends the
// phase's span with one duration and one error, so the
// agentflow_sandbox_phase_duration_seconds histogram and the trace cannot
// disagree: this is the only place either is recorded.
func (at *attempt) phase(ctx context.Context, name string) (context.Context, func(error)) {
	start := time.Now()
	ctx, span := at.a.tracer.Start(ctx, SpanPhasePrefix+name,
		trace.WithTimestamp(start), trace.WithAttributes(attribute.String(AttrPhase, name)))
	return ctx, func(err error) {
		d := time.Since(start)
		at.a.opts.Metrics.ObservePhase(name, d, err)
		at.spanError(span, err)
		span.End(trace.WithTimestamp(start.Add(d)))
	}
}

// spanError marks span failed with err, scrubbed: the one way an error
// reaches a span (span.RecordError would export err.Error() verbatim, and
// a host or store error may quote a secret the tool printed).
func (at *attempt) spanError(span trace.Span, err error) {
	if err == nil || !span.IsRecording() {
		return
	}
	msg := at.scrub.String(err.Error())
	kind := failure.Kind(err)
	span.SetAttributes(attribute.String(AttrFailure, kind))
	span.AddEvent("exception", trace.WithAttributes(
		attribute.String("exception.type", kind),
		attribute.String("exception.message", msg),
	))
	span.SetStatus(codes.Error, msg)
}

// endSpan ends the attempt's span with its outcome.
func (at *attempt) endSpan(err error) {
	if at.adoptedFrom > 0 {
		at.span.SetAttributes(attribute.Int(AttrAdoptedFrom, int(at.adoptedFrom)))
	}
	at.spanError(at.span, err)
	at.span.End()
}
