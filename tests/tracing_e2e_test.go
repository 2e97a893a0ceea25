//go:build e2e

package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/cli/engine"
	"github.com/agentflow/agentflow/internal/metrics"
	"github.com/agentflow/agentflow/internal/tracing"
	"github.com/agentflow/agentflow/internal/tracing/tracingtest"
	"github.com/agentflow/agentflow/worker"
	"github.com/agentflow/agentflow/workflows"
)

const tracingSecret = "trace-S3CR3T-7f3a9c"

const tracingSpec = `name: traced
version: "1.0.0"
secrets:
  - {name: token, source: env://AF_E2E_TRACE_TOKEN}
steps:
  - id: first
    tool: testtool:1.0
    inputs: {mode: ok, msg: "input-never-traced", token: "{{ .secrets.token }}"}
  - id: second
    tool: testtool:1.0
    inputs: {mode: ok, prev: "{{ .steps.first.output.msg }}"}
    depends_on: [first]
`

// TestTracingEndToEnd: with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a real
// OTLP/gRPC receiver (tracingtest, ours) for agentctl (a subprocess) and
// the worker (reading the same standard variables), a two-step run is ONE
// trace: agentctl's StartWorkflow span is its root, and each step attempt's
// span hangs under it through the workflow and activity spans of the
// Temporal interceptor, with its sandbox phases as children. No span
// carries the step's secret or its input.
func TestTracingEndToEnd(t *testing.T) {
	rcv := tracingtest.Start(t)
	otelEnv := map[string]string{
		tracing.EnvEndpoint: rcv.GRPCEndpoint,
		tracing.EnvProtocol: tracing.ProtocolGRPC,
		// Export promptly; the test waits for spans, not for a time.
		"OTEL_BSP_SCHEDULE_DELAY": "100",
	}
	// The in-process worker reads the process environment, like
	// `agentctl worker` does.
	for k, v := range otelEnv {
		t.Setenv(k, v)
	}
	t.Setenv("AF_E2E_TRACE_TOKEN", tracingSecret)
	e := startEngine(t)
	bin := sharedAgentctl(t)

	agentctl := func(t *testing.T, args ...string) (int, string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"--address", e.address}, args...)...)
		cmd.Env = os.Environ()
		for k, v := range otelEnv {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := cmd.ProcessState.ExitCode()
		if err != nil && code < 0 {
			t.Fatalf("agentctl %v: %v", args, err)
		}
		t.Logf("agentctl %s → %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
		return code, out.String(), errb.String()
	}

	code, _, errOut := agentctl(t, "tool", "register", "--name", "testtool", "--version", "1.0", "--image", e.images["testtool"])
	require.Equal(t, 0, code, errOut)

	specFile := filepath.Join(e.tmp, "traced.yaml")
	require.NoError(t, os.WriteFile(specFile, []byte(tracingSpec), 0o600))
	id := fmt.Sprintf("traced-%d", time.Now().UnixNano())
	code, out, errOut := agentctl(t, "run", "-f", specFile, "--name", id, "--wait", "-o", "json")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, errOut, "warning: tracing", "agentctl delivered its spans")
	var st workflows.Status
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, workflows.RunSucceeded, st.Status)

	// The run's trace: the one agentctl's StartWorkflow span started.
	clientSpan := func(spans []tracingtest.Span) (tracingtest.Span, bool) {
		for _, s := range tracingtest.Named(spans, "StartWorkflow:"+workflows.WorkflowName) {
			if s.Attributes["temporalWorkflowID"] == id {
				return s, true
			}
		}
		return tracingtest.Span{}, false
	}
	// Complete once the workflow's span (ended when the run closed) and
	// both attempts with four phases each have arrived.
	complete := func(spans []tracingtest.Span) bool {
		root, ok := clientSpan(spans)
		if !ok {
			return false
		}
		tr := tracingtest.Trace(spans, root.TraceID)
		if len(tracingtest.Named(tr, "RunWorkflow:"+workflows.WorkflowName)) == 0 {
			return false
		}
		attempts := tracingtest.Named(tr, activities.SpanAttempt)
		if len(attempts) != 2 {
			return false
		}
		for _, a := range attempts {
			if len(tracingtest.Children(tr, a)) < 4 {
				return false
			}
		}
		return true
	}
	wctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	spans, err := rcv.Wait(wctx, complete)
	require.NoError(t, err, "spans: %v", names(spans))

	root, _ := clientSpan(spans)
	require.Empty(t, root.ParentSpanID, "agentctl run starts the trace")
	require.Equal(t, engine.TracingServiceName, root.Service)
	tr := tracingtest.Trace(spans, root.TraceID)
	t.Logf("trace %s: %v", root.TraceID, names(tr))
	byID := map[string]tracingtest.Span{}
	for _, s := range tr {
		byID[s.SpanID] = s
	}
	// ancestry names a span's ancestors up to the root (which must be
	// agentctl's span: one trace, no broken link).
	ancestry := func(s tracingtest.Span) []string {
		var chain []string
		for s.ParentSpanID != "" {
			p, ok := byID[s.ParentSpanID]
			require.True(t, ok, "parent %s of %s is in the trace", s.ParentSpanID, s.Name)
			chain = append(chain, p.Name)
			s = p
		}
		require.Equal(t, root.SpanID, s.SpanID, "the root is agentctl's span")
		return chain
	}

	attempts := tracingtest.Named(tr, activities.SpanAttempt)
	require.Len(t, attempts, 2, "one span per step attempt")
	wantPhases := map[string][]string{
		"first":  {metrics.PhaseProvision, metrics.PhaseExec, metrics.PhaseCheckpoint, metrics.PhaseTerminate},
		"second": {metrics.PhaseRestore, metrics.PhaseExec, metrics.PhaseCheckpoint, metrics.PhaseTerminate},
	}
	for _, a := range attempts {
		step := a.Attributes[activities.AttrStepID]
		require.Equal(t, worker.TracingServiceName, a.Service)
		require.Equal(t, id, a.Attributes[activities.AttrAgentID])
		require.Equal(t, st.RunID, a.Attributes[activities.AttrRunID])
		require.Equal(t, "1", a.Attributes[activities.AttrAttempt])
		require.NotEmpty(t, a.Attributes[activities.AttrImageDigest])
		require.Equal(t, []string{
			"RunActivity:RunStep", "StartActivity:RunStep",
			"RunWorkflow:" + workflows.WorkflowName, "StartWorkflow:" + workflows.WorkflowName,
		}, ancestry(a), "step %s", step)

		var phases []string
		for _, c := range tracingtest.Children(tr, a) {
			phases = append(phases, strings.TrimPrefix(c.Name, activities.SpanPhasePrefix))
			require.Equal(t, "Unset", c.StatusCode, c.Name)
			require.False(t, c.End.Before(c.Start), c.Name)
			// The Docker client's spans under a phase: no headers recorded
			// (X-Registry-Auth travels there).
			for _, d := range tracingtest.Children(tr, c) {
				for k := range d.Attributes {
					require.NotContains(t, strings.ToLower(k), "header", "%s: %s", d.Name, k)
				}
			}
		}
		require.Equal(t, wantPhases[step], phases, "step %s", step)
		delete(wantPhases, step)
	}
	require.Empty(t, wantPhases, "both steps traced")

	// Nothing any process exported names the secret or the input.
	for _, s := range rcv.Spans() {
		b, err := json.Marshal(s)
		require.NoError(t, err)
		require.NotContains(t, string(b), tracingSecret, s.Name)
		require.NotContains(t, string(b), "input-never-traced", s.Name)
	}
}

func names(spans []tracingtest.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Service+"/"+s.Name)
	}
	return out
}
