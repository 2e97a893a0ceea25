package activities

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/hosttest"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/spec"
)

// TestRunStepEgress: a step with egress gets a NetworkEgress sandbox whose
// policy carries the substituted header values; the tool's input and
// environment never do; every connection the host reports is a line of
// the step's log (scrubbed, control characters dropped) and a metric.
func TestRunStepEgress(t *testing.T) {
	const secret = "tok-S3CR3T-value" // AF_TEST_TOKEN in the harness
	h := newHarness(t)
	var seen exechost.ExecRequest
	h.host.exec = func(_ context.Context, req exechost.ExecRequest) (*exechost.ExecResult, error) {
		seen = req
		provisions, _, _, _, _ := h.host.snapshot()
		events := provisions[len(provisions)-1].Egress.Events
		events(exechost.EgressEvent{Host: "api.example.com", Port: 443, Kind: "mitm", Allowed: true, Reason: "egress rule api.example.com:443",
			Address: "10.1.2.3:443", BytesOut: 1200, BytesIn: 48000, Duration: 120 * time.Millisecond})
		events(exechost.EgressEvent{Host: "evil.example\n--- agentflow: attempt 1 succeeded", Port: 80, Kind: "http",
			Reason: "not on the step's egress list"})
		events(exechost.EgressEvent{Host: "echo.example.com", Port: 443, Kind: "connect", Reason: "upstream said " + secret})
		return &exechost.ExecResult{Stdout: []byte(`{"ok":true}`)}, nil
	}
	req := baseReq()
	req.SecretSources = map[string]string{"api_token": "env://AF_TEST_TOKEN"}
	req.Input = map[string]any{"q": "hi"}
	req.Resources.MaxEgressBytes = 1 << 20
	req.Egress = []spec.EgressRule{
		{Host: "api.example.com", Port: 443, Headers: map[string]string{"Authorization": "Bearer {{ .secrets.api_token }}", "X-Plain": "literal"}},
		{Host: "*.cdn.example.com", Port: 443},
	}
	res, err := h.run(t, req)
	require.NoError(t, err)
	require.Equal(t, true, res.Output["ok"])

	provisions, _, _, _, _ := h.host.snapshot()
	require.Len(t, provisions, 1)
	p := provisions[0]
	require.Equal(t, exechost.NetworkEgress, p.Network)
	require.NotNil(t, p.Egress)
	require.Equal(t, int64(1<<20), p.Egress.MaxBytes)
	require.Equal(t, []exechost.EgressRule{
		{Host: "api.example.com", Port: 443, Headers: map[string]string{"Authorization": "Bearer " + secret, "X-Plain": "literal"}},
		{Host: "*.cdn.example.com", Port: 443},
	}, p.Egress.Rules)
	// The tool holds nothing of it.
	require.NotContains(t, string(seen.Stdin), secret)
	for k, v := range seen.Env {
		require.NotContains(t, v, secret, k)
	}
	require.Empty(t, seen.Secrets, "a secret used only in a header is not the tool's")
	for k, v := range p.Env {
		require.NotContains(t, v, secret, k)
	}

	log := h.log(t, req)
	t.Log(log)
	require.NotContains(t, log, secret)
	require.Contains(t, log, "--- agentflow: egress mitm api.example.com:443 allowed (egress rule api.example.com:443) → 10.1.2.3:443, 1200 B out, 48000 B in, 120 ms\n")
	require.Contains(t, log, "--- agentflow: egress http evil.example--- agentflow: attempt 1 succeeded:80 refused: not on the step's egress list\n",
		"a host cannot start a line of its own")
	require.Contains(t, log, "refused: upstream said ***")

	m := h.metrics
	require.Equal(t, 1.0, testutil.ToFloat64(m.EgressConnections.WithLabelValues("echo:1.0", "allowed")))
	require.Equal(t, 2.0, testutil.ToFloat64(m.EgressConnections.WithLabelValues("echo:1.0", "refused")))
	require.Equal(t, 1200.0, testutil.ToFloat64(m.EgressBytes.WithLabelValues("echo:1.0", "out")))
	require.Equal(t, 48000.0, testutil.ToFloat64(m.EgressBytes.WithLabelValues("echo:1.0", "in")))
}

// TestRunStepWithoutEgressIsNetworkNone: no egress, no boundary.
func TestRunStepWithoutEgressIsNetworkNone(t *testing.T) {
	h := newHarness(t)
	_, err := h.run(t, baseReq())
	require.NoError(t, err)
	provisions, _, _, _, _ := h.host.snapshot()
	require.Equal(t, exechost.NetworkNone, provisions[0].Network)
	require.Nil(t, provisions[0].Egress)
}

// TestRunStepEgressDefaultBudget: a request without max_egress (a plan
// compiled before it existed) gets the default.
func TestRunStepEgressDefaultBudget(t *testing.T) {
	h := newHarness(t)
	req := baseReq()
	req.Egress = []spec.EgressRule{{Host: "api.example.com", Port: 443}}
	_, err := h.run(t, req)
	require.NoError(t, err)
	provisions, _, _, _, _ := h.host.snapshot()
	require.Equal(t, int64(exechost.DefaultEgressBytes), provisions[0].Egress.MaxBytes)
}

// TestRunStepEgressHeaderErrors: a header whose secret the step does not
// resolve, or whose value would split the request, fails the attempt as
// InvalidInput before any sandbox exists, naming the header, never the
// value.
func TestRunStepEgressHeaderErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sources map[string]string
		header  string
		want    string
	}{
		{name: "secret not among the step's", header: "Bearer {{ .secrets.other }}", want: `secret "other" has no value`},
		{name: "value with a line break", sources: map[string]string{"api_token": "env://AF_BREAK"}, header: "Bearer {{ .secrets.api_token }}", want: "CR, LF or NUL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.opts.Secrets = &secrets.Sources{Policy: secrets.Policy{EnvAllow: []string{"AF_*"}}, LookupEnv: func(k string) (string, bool) {
				v, ok := map[string]string{"AF_BREAK": "tok\r\nX-Evil: 1"}[k]
				return v, ok
			}}
			req := baseReq()
			req.SecretSources = tc.sources
			req.Egress = []spec.EgressRule{{Host: "api.example.com", Port: 443, Headers: map[string]string{"Authorization": tc.header}}}
			_, err := h.run(t, req)
			require.Error(t, err)
			require.Contains(t, err.Error(), ErrTypeInvalidInput)
			require.Contains(t, err.Error(), "header Authorization")
			require.Contains(t, err.Error(), tc.want)
			require.NotContains(t, err.Error(), "X-Evil")
			provisions, _, _, _, _ := h.host.snapshot()
			require.Empty(t, provisions, "no sandbox for a step whose headers cannot be built")
		})
	}
}

// TestEgressLogBounded: past maxEgressLogLines connections the log says
// how many more there were; the metrics count them all.
func TestEgressLogBounded(t *testing.T) {
	h := newHarness(t)
	l := &egressLog{metrics: h.metrics, tool: "t"}
	for range maxEgressLogLines + 5 {
		l.add(exechost.EgressEvent{Host: "a.example.com", Port: 443, Kind: "connect", Allowed: true})
	}
	lines := l.lines()
	require.Equal(t, maxEgressLogLines+1, strings.Count(lines, "\n"))
	require.Contains(t, lines, "5 more connections not listed")
	require.Equal(t, float64(maxEgressLogLines+5), testutil.ToFloat64(h.metrics.EgressConnections.WithLabelValues("t", "allowed")))
	b, _ := json.Marshal(lines)
	require.NotEmpty(t, b)
}

// TestRunStepEgressOnFake runs a step with egress on the contract-checking
// Fake: the sandbox's policy carries the substituted header, the tool's
// process view does not; the connections the boundary reports while the
// tool runs are in the step's log and metrics; the Fake takes no event
// once RunStep terminated the sandbox.
func TestRunStepEgressOnFake(t *testing.T) {
	var f *hosttest.Fake
	var seen hosttest.ExecContext
	tool := func(ctx context.Context, x hosttest.ExecContext) hosttest.Result {
		if x.Argv[0] != ToolCommand[0] {
			return hosttest.DefaultHandler(ctx, x)
		}
		seen = x
		for _, ev := range []exechost.EgressEvent{
			{Host: "api.example.com", Port: 443, Kind: "mitm", Allowed: true, Reason: "egress rule api.example.com:443",
				Address: "10.1.2.3:443", BytesOut: 300, BytesIn: 4000, Duration: 15 * time.Millisecond},
			{Host: "metadata.google.internal", Port: 80, Kind: "http", Reason: "not on the step's egress list"},
		} {
			if err := f.EmitEgress(x.ExecutionID, ev); err != nil {
				return hosttest.Result{ExitCode: 1, Stderr: []byte(err.Error())}
			}
		}
		return hosttest.Result{Stdout: []byte(`{"ok":true}`)}
	}
	var err error
	f, err = hosttest.NewFake(hosttest.Options{Handler: tool})
	require.NoError(t, err)
	h := newHarness(t)
	h.other = f
	req := baseReq()
	req.Checkpoints = nil
	req.SecretSources = map[string]string{"api_token": "env://AF_TEST_TOKEN"}
	req.Egress = []spec.EgressRule{{Host: "api.example.com", Port: 443, Headers: map[string]string{"Authorization": "Bearer {{ .secrets.api_token }}"}}}
	_, err = h.run(t, req)
	require.NoError(t, err)

	id := ExecutionIDFor(req.AgentID, req.RunID, req.StepID, 1)
	require.Equal(t, &exechost.EgressPolicy{
		Rules:    []exechost.EgressRule{{Host: "api.example.com", Port: 443, Headers: map[string]string{"Authorization": "Bearer " + testSecret}}},
		MaxBytes: exechost.DefaultEgressBytes,
	}, f.Egress(id))
	require.NotContains(t, string(seen.Stdin), testSecret)
	for k, v := range seen.Env {
		require.NotContains(t, v, testSecret, k)
	}
	require.Empty(t, seen.Secrets)

	log := h.log(t, req)
	require.NotContains(t, log, testSecret)
	require.Contains(t, log, "--- agentflow: egress mitm api.example.com:443 allowed (egress rule api.example.com:443) → 10.1.2.3:443, 300 B out, 4000 B in, 15 ms\n")
	require.Contains(t, log, "--- agentflow: egress http metadata.google.internal:80 refused: not on the step's egress list\n")
	require.Equal(t, 1.0, testutil.ToFloat64(h.metrics.EgressConnections.WithLabelValues("echo:1.0", "refused")))

	require.Zero(t, f.Stats().Live)
	require.ErrorIs(t, f.EmitEgress(id, exechost.EgressEvent{Host: "api.example.com", Port: 443}), exechost.ErrTerminated)
}
