package tracing

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestInterceptorCarriesContextIntoActivities: the interceptor that
// ClientInterceptors returns also intercepts workers (a worker built on
// the client inherits it), and a span an activity opens with Tracer is a
// child of the activity's span, under the workflow's: the chain RunStep's
// attempt span relies on. (The e2e test checks it across processes.)
func TestInterceptorCarriesContextIntoActivities(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	p := &Provider{tp: sdk, sdk: sdk}
	ics, err := p.ClientInterceptors()
	require.NoError(t, err)
	require.Len(t, ics, 1)
	wi, ok := ics[0].(interceptor.WorkerInterceptor)
	require.True(t, ok, "the client interceptor is a worker interceptor too")

	act := func(ctx context.Context) error {
		_, span := p.Tracer().Start(ctx, "ours")
		span.End()
		return nil
	}
	wf := func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		return workflow.ExecuteActivity(ctx, "Act").Get(ctx, nil)
	}
	var s testsuite.WorkflowTestSuite
	s.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{wi}})
	env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "Wf"})
	env.RegisterActivityWithOptions(act, activity.RegisterOptions{Name: "Act"})
	env.ExecuteWorkflow("Wf")
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	t.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })

	byName := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		byName[s.Name] = s
	}
	chain := []string{"ours", "RunActivity:Act", "StartActivity:Act", "RunWorkflow:Wf"}
	for i := 0; i < len(chain)-1; i++ {
		child, okc := byName[chain[i]]
		parent, okp := byName[chain[i+1]]
		require.True(t, okc && okp, "spans %v", byName)
		require.Equal(t, parent.SpanContext.TraceID(), child.SpanContext.TraceID(), chain[i])
		require.Equal(t, parent.SpanContext.SpanID(), child.Parent.SpanID(), "%s under %s", chain[i], chain[i+1])
	}
}
