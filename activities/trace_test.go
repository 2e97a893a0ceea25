package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/metrics"
)

// tracedHarness is a harness whose activities export spans to memory.
func tracedHarness(t *testing.T) (*harness, *tracetest.InMemoryExporter) {
	h := newHarness(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h.opts.Tracer = tp.Tracer("test")
	return h, exp
}

func spanAttrs(s tracetest.SpanStub) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// everything is every string a span exports: name, attributes, events,
// status; what must never hold a secret or an input.
func everything(spans tracetest.SpanStubs) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintln(&b, s.Name, s.Status.Description)
		for _, kv := range s.Attributes {
			fmt.Fprintln(&b, kv.Key, kv.Value.Emit())
		}
		for _, e := range s.Events {
			fmt.Fprintln(&b, e.Name)
			for _, kv := range e.Attributes {
				fmt.Fprintln(&b, kv.Key, kv.Value.Emit())
			}
		}
	}
	return b.String()
}

// phaseSample is the phase histogram's count and sum for phase/result.
func phaseSample(t *testing.T, m *metrics.Metrics, phase, result string) (uint64, float64) {
	t.Helper()
	o, err := m.SandboxPhase.GetMetricWithLabelValues(phase, result)
	require.NoError(t, err)
	var pb dto.Metric
	require.NoError(t, o.(interface{ Write(*dto.Metric) error }).Write(&pb))
	return pb.GetHistogram().GetSampleCount(), pb.GetHistogram().GetSampleSum()
}

func TestRunStepSpans(t *testing.T) {
	const secret = "tok-S3CR3T-value"
	tests := []struct {
		name       string
		setup      func(h *harness, req *StepRequest)
		phases     []string // children of the attempt span, in order
		failedAt   string   // the phase whose span is an error ("" = none)
		wantStatus codes.Code
		wantFail   string // agentflow.failure of the attempt span
		exitCode   string // agentflow.exit_code of the exec span ("" = none)
	}{
		{
			name:   "success from checkpoints is a restore",
			phases: []string{metrics.PhaseRestore, metrics.PhaseExec, metrics.PhaseCheckpoint, metrics.PhaseTerminate},
			setup: func(h *harness, _ *StepRequest) {
				h.host.exec = result(`{"ok":true}`, "", 0)
			},
			exitCode: "0",
		},
		{
			name:   "success without checkpoints is a provision",
			phases: []string{metrics.PhaseProvision, metrics.PhaseExec, metrics.PhaseCheckpoint, metrics.PhaseTerminate},
			setup: func(h *harness, req *StepRequest) {
				req.Checkpoints = nil
				h.host.exec = result(`{"ok":true}`, "", 0)
			},
			exitCode: "0",
		},
		{
			name:   "tool failure: the attempt failed, its phases did not",
			phases: []string{metrics.PhaseRestore, metrics.PhaseExec, metrics.PhaseCheckpoint, metrics.PhaseTerminate},
			setup: func(h *harness, _ *StepRequest) {
				h.host.exec = result(`{"error":"bad token `+secret+`"}`, "", 3)
			},
			wantStatus: codes.Error, wantFail: ErrTypeToolFailed, exitCode: "3",
		},
		{
			name:   "provision error quoting a secret",
			phases: []string{metrics.PhaseRestore, metrics.PhaseTerminate},
			setup: func(h *harness, _ *StepRequest) {
				h.host.provisionErr = fmt.Errorf("daemon says %s: %w", secret, exechost.ErrTerminated)
			},
			failedAt: metrics.PhaseRestore, wantStatus: codes.Error, wantFail: ErrTypeSandboxLost,
		},
		{
			name:   "exec error",
			phases: []string{metrics.PhaseRestore, metrics.PhaseExec, metrics.PhaseTerminate},
			setup: func(h *harness, _ *StepRequest) {
				h.host.exec = func(context.Context, exechost.ExecRequest) (*exechost.ExecResult, error) {
					return nil, fmt.Errorf("lost %s: %w", secret, exechost.ErrTerminated)
				}
			},
			failedAt: metrics.PhaseExec, wantStatus: codes.Error, wantFail: ErrTypeSandboxLost,
		},
		{
			name:   "checkpoint error",
			phases: []string{metrics.PhaseRestore, metrics.PhaseExec, metrics.PhaseCheckpoint, metrics.PhaseTerminate},
			setup: func(h *harness, _ *StepRequest) {
				h.host.exec = result(`{"ok":true}`, "", 0)
				h.host.checkpoint = errors.New("disk full near " + secret)
			},
			failedAt: metrics.PhaseCheckpoint, wantStatus: codes.Error, wantFail: ErrTypeSandboxLost, exitCode: "0",
		},
		{
			name:   "secret refused before any sandbox",
			phases: nil,
			setup: func(_ *harness, req *StepRequest) {
				req.SecretSources = map[string]string{"x": "env://NOT_ALLOWED"}
			},
			wantStatus: codes.Error, wantFail: ErrTypePolicy,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, exp := tracedHarness(t)
			req := baseReq()
			req.SecretSources = map[string]string{"api_token": "env://AF_TEST_TOKEN"}
			req.Input = map[string]any{"token": "{{ .secrets.api_token }}", "q": "input-value-never-traced"}
			tc.setup(h, &req)
			_, _ = h.run(t, req)

			spans := exp.GetSpans()
			var attempt tracetest.SpanStub
			var found int
			for _, s := range spans {
				if s.Name == SpanAttempt {
					attempt, found = s, found+1
				}
			}
			require.Equal(t, 1, found, "one attempt span")
			a := spanAttrs(attempt)
			require.Equal(t, req.AgentID, a[AttrAgentID])
			require.Equal(t, req.RunID, a[AttrRunID])
			require.Equal(t, req.StepID, a[AttrStepID])
			require.Equal(t, "1", a[AttrAttempt])
			require.Equal(t, req.Image, a[AttrImage])
			require.Equal(t, string(ExecutionIDFor(req.AgentID, req.RunID, req.StepID, 1)), a[AttrExecution])
			if len(tc.phases) > 0 && tc.failedAt != tc.phases[0] {
				require.Equal(t, "sha256:fake", a[AttrImageDigest])
			}
			require.Equal(t, tc.wantStatus, attempt.Status.Code)
			require.Equal(t, tc.wantFail, a[AttrFailure])

			// The phases are the attempt's children, in order, each the
			// same duration and outcome as its metric sample.
			var got []string
			for _, s := range spans {
				if s.Name == SpanAttempt {
					continue
				}
				require.Equal(t, attempt.SpanContext.TraceID(), s.SpanContext.TraceID())
				require.Equal(t, attempt.SpanContext.SpanID(), s.Parent.SpanID(), "%s is a child of the attempt", s.Name)
				phase := strings.TrimPrefix(s.Name, SpanPhasePrefix)
				got = append(got, phase)
				require.Equal(t, phase, spanAttrs(s)[AttrPhase])
				res := "ok"
				if phase == tc.failedAt {
					res = "error"
					require.Equal(t, codes.Error, s.Status.Code, phase)
					require.Contains(t, s.Status.Description, "***", "the error is scrubbed, not dropped")
				} else {
					require.Equal(t, codes.Unset, s.Status.Code, phase)
				}
				n, sum := phaseSample(t, h.metrics, phase, res)
				require.Equal(t, uint64(1), n, phase)
				require.Equal(t, s.EndTime.Sub(s.StartTime).Seconds(), sum, "%s: span and metric agree", phase)
				if phase == metrics.PhaseExec {
					require.Equal(t, tc.exitCode, spanAttrs(s)[AttrExitCode])
				}
			}
			require.Equal(t, tc.phases, got)

			all := everything(spans)
			require.NotContains(t, all, secret)
			require.NotContains(t, all, "input-value-never-traced")
		})
	}
}

// TestRunStepWithoutTracer: no tracer is the no-op, and metrics still
// record every phase.
func TestRunStepWithoutTracer(t *testing.T) {
	h := newHarness(t)
	h.host.exec = result(`{"ok":true}`, "", 0)
	_, err := h.run(t, baseReq())
	require.NoError(t, err)
	for _, p := range []string{metrics.PhaseRestore, metrics.PhaseExec, metrics.PhaseCheckpoint, metrics.PhaseTerminate} {
		n, _ := phaseSample(t, h.metrics, p, "ok")
		require.Equal(t, uint64(1), n, p)
	}
}
