package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/logstore"
	"github.com/agentflow/agentflow/internal/metrics"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/spec"
)

const testImage = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func baseReq() StepRequest {
	return StepRequest{
		AgentID: "agent-1",
		RunID:   "run-1",
		StepID:  "fetch",
		Tool:    "echo:1.0",
		Image:   testImage,
		Input:   map[string]any{"q": "hello"},
		Env:     map[string]string{"LOG_LEVEL": "debug"},
		Resources: spec.Resources{
			NanoCPUs: 1e9, MemoryBytes: 512 << 20, DiskBytes: 256 << 20, Pids: 256, MaxOutputBytes: 8 << 20,
		},
		Timeout:     30 * time.Second,
		Checkpoints: []string{"cp-a", "cp-b"},
	}
}

type harness struct {
	host    *fakeHost
	other   exechost.ExecutionHost // when set, RunStep runs on it instead of host
	logs    *logstore.Store
	mem     *objstore.Mem
	metrics *metrics.Metrics
	opts    Options
	bg      context.Context
	// onHeartbeat, when set, receives every heartbeat, synchronously: the
	// heartbeat call waits for it as for the server's answer.
	onHeartbeat func(details converter.EncodedValues)
}

func newHarness(t *testing.T) *harness {
	mem := objstore.NewMem()
	h := &harness{host: newFakeHost(), mem: mem, metrics: metrics.New(), bg: context.Background(),
		// Short flushes: the live-log tests watch chunks arrive while the
		// fake tool runs.
		logs: logstore.New(mem, logstore.Options{FlushInterval: 5 * time.Millisecond})}
	h.opts = Options{
		Logs:    h.logs,
		Metrics: h.metrics,
		Secrets: &secrets.Sources{Policy: secrets.Policy{EnvAllow: []string{"AF_*"}}, LookupEnv: func(k string) (string, bool) {
			v, ok := map[string]string{"AF_TEST_TOKEN": "tok-S3CR3T-value", "AF_QUOTE": `a"b`}[k]
			return v, ok
		}},
		Labels: map[string]string{"agentflow.test": "1"},
	}
	return h
}

func (h *harness) run(t *testing.T, req StepRequest) (*StepResult, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := s.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{BackgroundActivityContext: h.bg})
	if h.onHeartbeat != nil {
		env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) { h.onHeartbeat(details) })
	}
	opts := h.opts
	opts.Host = h.host
	if h.other != nil {
		opts.Host = h.other
	}
	a := New(opts)
	env.RegisterActivity(a)
	v, err := env.ExecuteActivity(a.RunStep, req)
	if err != nil {
		return nil, err
	}
	var res StepResult
	require.NoError(t, v.Get(&res))
	return &res, nil
}

func (h *harness) log(t *testing.T, req StepRequest) string {
	t.Helper()
	b, err := h.logs.Read(t.Context(), logstore.Key{AgentID: req.AgentID, RunID: req.RunID, StepID: req.StepID, Attempt: 1}, 0)
	require.NoError(t, err)
	return string(b)
}

// TestRunStepFirstHeartbeatOffPath: the attempt's first heartbeat (the
// one that names the worker) is sent beside the step, not before it: the
// SDK sends a first heartbeat synchronously, and a step that waited for
// it paid a server round trip before provisioning. Here the first
// heartbeat's answer is held until the tool has run (and the tool runs
// only once that heartbeat is on its way); a step that waited for the
// answer would never get to the tool.
func TestRunStepFirstHeartbeatOffPath(t *testing.T) {
	h := newHarness(t)
	sent, ran := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var first []string
	h.onHeartbeat = func(details converter.EncodedValues) {
		once.Do(func() {
			var phase, worker string
			_ = details.Get(&phase, &worker)
			first = []string{phase, worker}
			close(sent)
			select {
			case <-ran:
			case <-time.After(10 * time.Second):
				t.Error("the step waited for its first heartbeat's answer before running the tool")
			}
		})
	}
	h.opts.Identity = "worker-hb"
	h.host.exec = func(_ context.Context, _ exechost.ExecRequest) (*exechost.ExecResult, error) {
		select {
		case <-sent:
		case <-time.After(10 * time.Second):
			t.Error("no heartbeat while the tool ran")
		}
		close(ran)
		return &exechost.ExecResult{Stdout: []byte(`{"ok": true}` + "\n")}, nil
	}
	res, err := h.run(t, baseReq())
	require.NoError(t, err)
	require.Equal(t, map[string]any{"ok": true}, res.Output)
	require.Len(t, first, 2, "the attempt sent its first heartbeat")
	require.Equal(t, "worker-hb", first[1], "the first heartbeat names the worker")
}

func TestRunStepSuccess(t *testing.T) {
	h := newHarness(t)
	h.host.exec = func(_ context.Context, req exechost.ExecRequest) (*exechost.ExecResult, error) {
		var in map[string]any
		if err := json.Unmarshal(req.Stdin, &in); err != nil {
			return nil, err
		}
		out, _ := json.Marshal(map[string]any{"echo": in["q"], "step": req.Env["AGENTFLOW_STEP_ID"], "attempt": req.Env["AGENTFLOW_ATTEMPT"]})
		return &exechost.ExecResult{Stdout: append(out, '\n'), Stderr: []byte("working\n")}, nil
	}
	req := baseReq()
	res, err := h.run(t, req)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"echo": "hello", "step": "fetch", "attempt": "1"}, res.Output)
	require.Equal(t, int32(1), res.Attempt)
	require.Equal(t, "sha256:fake", res.ImageDigest)
	require.NotEmpty(t, res.CheckpointID)

	provisions, execs, checkpoints, terminates, live := h.host.snapshot()
	require.Len(t, provisions, 1)
	p := provisions[0]
	id := ExecutionIDFor("agent-1", "run-1", "fetch", 1)
	require.Equal(t, id, p.ExecutionID)
	require.Equal(t, testImage, p.Image)
	require.Equal(t, exechost.NetworkNone, p.Network)
	require.Equal(t, []exechost.CheckpointID{"cp-a", "cp-b"}, p.Workspace.Checkpoints)
	require.Equal(t, exechost.ResourceLimits{
		NanoCPUs: 1e9, MemoryBytes: 512 << 20, DiskBytes: 256 << 20, Pids: 256, MaxOutputBytes: 8 << 20,
		Runtime: 30*time.Second + BudgetMargin, // BudgetFor(30s).SandboxRuntime
	}, p.Resources)
	require.Equal(t, map[string]string{"LOG_LEVEL": "debug"}, p.Env)
	require.Equal(t, "1", p.Labels["agentflow.test"])
	require.Equal(t, "fetch", p.Labels[LabelStepID])
	require.Len(t, execs, 1)
	require.Equal(t, ToolCommand, execs[0].Command)
	require.Equal(t, 30*time.Second, execs[0].Timeout)
	require.Empty(t, execs[0].Secrets)
	require.Equal(t, []exechost.ExecutionID{id}, checkpoints)
	require.Empty(t, h.host.checkpointRequests()[0].Redact, "a step without secrets redacts nothing")
	require.Equal(t, []exechost.ExecutionID{id}, terminates)
	require.Zero(t, live)

	require.Equal(t, "working\n", h.log(t, req))
	require.InDelta(t, 1, testutil.ToFloat64(h.metrics.ToolInvocations.WithLabelValues("echo:1.0", "success", "none")), 0)
	require.InDelta(t, 0, testutil.ToFloat64(h.metrics.ActiveSandboxes), 0)
}

func TestExecutionIDIsDeterministic(t *testing.T) {
	a := ExecutionIDFor("ag", "run", "step", 1)
	require.Equal(t, a, ExecutionIDFor("ag", "run", "step", 1))
	require.NotEqual(t, a, ExecutionIDFor("ag", "run", "step", 2))
	require.NotEqual(t, a, ExecutionIDFor("ag", "run2", "step", 1))
	// Separators matter: ("a","bc") and ("ab","c") differ.
	require.NotEqual(t, ExecutionIDFor("a", "bc", "s", 1), ExecutionIDFor("ab", "c", "s", 1))
	require.Regexp(t, `^af-[0-9a-f]{16}$`, string(a))
}

func result(stdout, stderr string, exit int) func(context.Context, exechost.ExecRequest) (*exechost.ExecResult, error) {
	return func(context.Context, exechost.ExecRequest) (*exechost.ExecResult, error) {
		return &exechost.ExecResult{Stdout: []byte(stdout), Stderr: []byte(stderr), ExitCode: exit}, nil
	}
}

func TestRunStepFailures(t *testing.T) {
	tests := []struct {
		name          string
		setup         func(h *harness, req *StepRequest)
		wantType      string
		nonRetryable  bool
		wantMsg       string
		wantExit      int
		wantCP        bool // the failed attempt was checkpointed
		wantProvision bool
		wantReason    string // metrics reason of a ToolFailed
	}{
		{
			name:     "non-zero exit with error field",
			setup:    func(h *harness, _ *StepRequest) { h.host.exec = result(`{"error":"boom"}`, "stack trace\n", 3) },
			wantType: ErrTypeToolFailed, wantReason: "exit_code", wantMsg: "tool exited with code 3: boom", wantExit: 3, wantCP: true, wantProvision: true,
		},
		{
			name:     "non-zero exit",
			setup:    func(h *harness, _ *StepRequest) { h.host.exec = result("", "segfault\n", 139) },
			wantType: ErrTypeToolFailed, wantReason: "exit_code", wantMsg: "tool exited with code 139", wantExit: 139, wantCP: true, wantProvision: true,
		},
		{
			name:     "stdout not JSON",
			setup:    func(h *harness, _ *StepRequest) { h.host.exec = result("hello world", "", 0) },
			wantType: ErrTypeToolFailed, wantReason: "parse_error", wantMsg: "not one JSON object", wantCP: true, wantProvision: true,
		},
		{
			name:     "two JSON objects",
			setup:    func(h *harness, _ *StepRequest) { h.host.exec = result(`{"a":1}{"b":2}`, "", 0) },
			wantType: ErrTypeToolFailed, wantReason: "parse_error", wantMsg: "more than one JSON value", wantCP: true, wantProvision: true,
		},
		{
			name:     "JSON array",
			setup:    func(h *harness, _ *StepRequest) { h.host.exec = result(`[1,2]`, "", 0) },
			wantType: ErrTypeToolFailed, wantReason: "parse_error", wantMsg: "got a JSON array", wantCP: true, wantProvision: true,
		},
		{
			name:     "empty stdout",
			setup:    func(h *harness, _ *StepRequest) { h.host.exec = result("  \n", "", 0) },
			wantType: ErrTypeToolFailed, wantReason: "parse_error", wantMsg: "stdout is empty", wantCP: true, wantProvision: true,
		},
		{
			name:     "error field",
			setup:    func(h *harness, _ *StepRequest) { h.host.exec = result(`{"error":"customer unknown"}`, "", 0) },
			wantType: ErrTypeToolFailed, wantReason: "tool_error", wantMsg: "tool reported an error: customer unknown", wantCP: true, wantProvision: true,
		},
		{
			name: "OOM killed",
			setup: func(h *harness, _ *StepRequest) {
				h.host.exec = func(context.Context, exechost.ExecRequest) (*exechost.ExecResult, error) {
					return &exechost.ExecResult{ExitCode: 137, OOMKilled: true}, nil
				}
			},
			wantType: ErrTypeToolFailed, wantReason: "oom", wantMsg: "memory limit", wantExit: 137, wantCP: true, wantProvision: true,
		},
		{
			name: "timeout",
			setup: func(h *harness, _ *StepRequest) {
				h.host.exec = func(context.Context, exechost.ExecRequest) (*exechost.ExecResult, error) {
					return &exechost.ExecResult{ExitCode: -1, TimedOut: true, Stderr: []byte("still going")}, fmt.Errorf("exec: %w", exechost.ErrTimeout)
				}
			},
			wantType: ErrTypeTimeout, wantMsg: "did not finish within the step timeout of 30s", wantExit: -1, wantProvision: true,
		},
		{
			name: "output cap",
			setup: func(h *harness, _ *StepRequest) {
				h.host.exec = func(context.Context, exechost.ExecRequest) (*exechost.ExecResult, error) {
					return &exechost.ExecResult{ExitCode: -1, Truncated: true}, fmt.Errorf("exec: %w", exechost.ErrOutputLimit)
				}
			},
			wantType: ErrTypeOutputLimit, wantMsg: "more than max_output (8388608 bytes)", wantExit: -1, wantProvision: true,
		},
		{
			name: "inline output limit",
			setup: func(h *harness, _ *StepRequest) {
				h.opts.InlineOutputLimit = 64
				h.host.exec = result(`{"data":"`+strings.Repeat("x", 100)+`"}`, "", 0)
			},
			wantType: ErrTypeOutputLimit, wantMsg: "write large data under /workspace", wantCP: true, wantProvision: true,
		},
		{
			name: "sandbox lost during exec",
			setup: func(h *harness, _ *StepRequest) {
				h.host.exec = func(context.Context, exechost.ExecRequest) (*exechost.ExecResult, error) {
					return nil, errors.New("docker daemon: connection refused")
				}
			},
			wantType: ErrTypeSandboxLost, wantMsg: "sandbox lost during exec: docker daemon: connection refused", wantExit: -1, wantProvision: true,
		},
		{
			name:     "checkpoint fails after success",
			setup:    func(h *harness, _ *StepRequest) { h.host.checkpoint = errors.New("disk full") },
			wantType: ErrTypeSandboxLost, wantMsg: "checkpoint workspace: disk full", wantProvision: true,
		},
		{
			name: "policy violation at provision",
			setup: func(h *harness, _ *StepRequest) {
				h.host.provisionErr = &exechost.PolicyError{Field: "env.API_TOKEN", Reason: "looks like a secret"}
			},
			wantType: ErrTypePolicy, nonRetryable: true, wantMsg: "env.API_TOKEN", wantExit: 0,
		},
		{
			name: "docker down at provision",
			setup: func(h *harness, _ *StepRequest) {
				h.host.provisionErr = errors.New("cannot connect to the Docker daemon")
			},
			wantType: ErrTypeSandboxLost, wantMsg: "provision sandbox for step fetch: cannot connect",
		},
		{
			name: "corrupt dependency checkpoint",
			setup: func(h *harness, _ *StepRequest) {
				h.host.provisionErr = fmt.Errorf("restore cp-a: %w", exechost.ErrCorruptCheckpoint)
			},
			wantType: ErrTypeInvalidInput, nonRetryable: true, wantMsg: "corrupt checkpoint",
		},
		{
			name: "unresolvable secret",
			setup: func(_ *harness, req *StepRequest) {
				req.SecretSources = map[string]string{"slack_webhook_url": "env://AF_NOT_SET"}
				req.Input["url"] = "{{ .secrets.slack_webhook_url }}"
			},
			wantType: ErrTypeInvalidInput, nonRetryable: true, wantMsg: "secret slack_webhook_url (env://AF_NOT_SET)",
		},
		{
			name: "env references undeclared secret",
			setup: func(_ *harness, req *StepRequest) {
				req.Env["API_TOKEN"] = "{{ .secrets.other }}"
			},
			wantType: ErrTypeInvalidInput, nonRetryable: true, wantMsg: "references secret other",
		},
		{
			name:     "no timeout",
			setup:    func(_ *harness, req *StepRequest) { req.Timeout = 0 },
			wantType: ErrTypeInvalidInput, nonRetryable: true, wantMsg: "step fetch has no timeout",
		},
		{
			name:     "negative timeout",
			setup:    func(_ *harness, req *StepRequest) { req.Timeout = -time.Second },
			wantType: ErrTypeInvalidInput, nonRetryable: true, wantMsg: "step fetch has no timeout",
		},
		{
			name: "git workspace and checkpoints",
			setup: func(_ *harness, req *StepRequest) {
				req.Git = &spec.GitWorkspace{Repository: "/srv/repo", Revision: "main"}
			},
			wantType: ErrTypeInvalidInput, nonRetryable: true, wantMsg: "both a git workspace and checkpoints",
		},
		{
			name: "gpu required but none",
			setup: func(h *harness, req *StepRequest) {
				req.Resources.GPUs = 1
				h.opts.GPUPolicy = GPUPolicyRequire
			},
			wantType: ErrTypePolicy, nonRetryable: true, wantMsg: "no GPU runtime",
		},
		{
			name: "worker has no secret resolver",
			setup: func(h *harness, req *StepRequest) {
				h.opts.Secrets = nil
				req.SecretSources = map[string]string{"tok": "env://AF_TEST_TOKEN"}
			},
			wantType: ErrTypeInvalidInput, nonRetryable: true, wantMsg: "no secret resolver",
		},
		{
			name: "secret substitution into input fails",
			setup: func(_ *harness, req *StepRequest) {
				req.Input["url"] = "{{ .secrets.undeclared }}"
			},
			wantType: ErrTypeInvalidInput, nonRetryable: true, wantMsg: "substitute secrets into the input of step fetch",
		},
		{
			name: "timeout during restore is a lost sandbox",
			setup: func(h *harness, _ *StepRequest) {
				h.host.provisionErr = fmt.Errorf("restore cp-a: %w", exechost.ErrTimeout)
			},
			wantType: ErrTypeSandboxLost, wantMsg: "provision sandbox for step fetch: restore cp-a",
		},
		{
			name:     "checkpoint timeout after success is a lost sandbox",
			setup:    func(h *harness, _ *StepRequest) { h.host.checkpoint = fmt.Errorf("export: %w", exechost.ErrTimeout) },
			wantType: ErrTypeSandboxLost, wantMsg: "checkpoint workspace: export", wantProvision: true,
		},
		{
			name:     "no image",
			setup:    func(_ *harness, req *StepRequest) { req.Image = "" },
			wantType: ErrTypeInvalidInput, nonRetryable: true, wantMsg: "has no image",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			req := baseReq()
			tc.setup(h, &req)
			_, err := h.run(t, req)
			require.Error(t, err)

			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			require.Equal(t, tc.wantType, appErr.Type())
			require.Equal(t, tc.nonRetryable, appErr.NonRetryable())
			require.Contains(t, appErr.Message(), tc.wantMsg)

			var d StepFailureDetails
			if tc.wantProvision {
				require.True(t, appErr.HasDetails())
				require.NoError(t, appErr.Details(&d))
				require.Equal(t, int32(1), d.Attempt)
				require.Equal(t, tc.wantExit, d.ExitCode)
				require.Equal(t, tc.wantCP, d.CheckpointID != "", "checkpoint id %q", d.CheckpointID)
			}

			provisions, _, _, terminates, live := h.host.snapshot()
			require.Zero(t, live, "a sandbox was left running")
			if len(provisions) > 0 {
				// Terminate always runs once a provision was attempted.
				require.Len(t, terminates, 1)
			}
			require.InDelta(t, 0, testutil.ToFloat64(h.metrics.ActiveSandboxes), 0)
			// Every failure is status="failed" with a reason of the closed
			// set; a ToolFailed names its cause.
			reason := tc.wantReason
			if reason == "" {
				reason = map[string]string{ErrTypeTimeout: "timeout", ErrTypeOutputLimit: "output_limit",
					ErrTypeSandboxLost: "sandbox_lost", ErrTypePolicy: "policy", ErrTypeInvalidInput: "invalid_input"}[tc.wantType]
			}
			require.NotEmpty(t, reason, "case lacks wantReason")
			require.InDelta(t, 1, testutil.ToFloat64(h.metrics.ToolInvocations.WithLabelValues("echo:1.0", "failed", reason)), 0)

			// Whatever failed, the attempt's log has exactly one failure
			// line, carrying the message (agentctl logs shows it).
			log := h.log(t, req)
			require.Equal(t, 1, strings.Count(log, "--- agentflow: attempt 1 failed: "), "log:\n%s", log)
			line := log[strings.Index(log, "--- agentflow: attempt 1 failed: "):]
			require.Contains(t, line, tc.wantMsg)
		})
	}
}

func TestRunStepFailureCarriesStderrTailAndLogsStdout(t *testing.T) {
	h := newHarness(t)
	h.opts.StderrTail = 15
	h.host.exec = result(`{"partial":true}`+"\n", strings.Repeat("a", 100)+"LAST-LINE-HERE\n", 1)
	req := baseReq()
	_, err := h.run(t, req)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Contains(t, appErr.Message(), "stderr (tail):\n…LAST-LINE-HERE\n")
	var d StepFailureDetails
	require.NoError(t, appErr.Details(&d))
	require.Equal(t, "…LAST-LINE-HERE\n", d.StderrTail)

	log := h.log(t, req)
	require.Contains(t, log, strings.Repeat("a", 100)+"LAST-LINE-HERE\n--- stdout ---\n{\"partial\":true}\n")
	require.Contains(t, log, "--- agentflow: attempt 1 failed: tool exited with code 1")
}

func TestRunStepSecretsSubstitutedAndScrubbed(t *testing.T) {
	const secret = "tok-S3CR3T-value"
	tests := []struct {
		name     string
		exitCode int
		stdout   string
		wantErr  bool
	}{
		{name: "success echoes secret", stdout: `{"echo":"` + secret + `","nested":{"` + secret + `":["x ` + secret + `"]},"quoted":"a\"b"}`},
		{name: "failure echoes secret", exitCode: 0, stdout: `{"error":"bad token ` + secret + `"}`, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			var seen exechost.ExecRequest
			h.host.exec = func(_ context.Context, req exechost.ExecRequest) (*exechost.ExecResult, error) {
				seen = req
				return &exechost.ExecResult{
					Stdout:   []byte(tc.stdout),
					Stderr:   []byte("using token " + secret + " and " + `a\"b` + "\n"),
					ExitCode: tc.exitCode,
				}, nil
			}
			req := baseReq()
			req.SecretSources = map[string]string{"api_token": "env://AF_TEST_TOKEN", "quote": "env://AF_QUOTE"}
			req.Input = map[string]any{"token": "{{ .secrets.api_token }}", "q": "{{ .secrets.quote }}", "plain": "hi"}
			req.Env = map[string]string{"API_TOKEN": "{{ .secrets.api_token }}", "LOG_LEVEL": "info"}

			res, err := h.run(t, req)

			// The tool got the real value, on stdin and as exec-only env.
			var in map[string]any
			require.NoError(t, json.Unmarshal(seen.Stdin, &in))
			require.Equal(t, map[string]any{"token": secret, "q": `a"b`, "plain": "hi"}, in)
			require.Equal(t, map[string]string{"API_TOKEN": secret}, seen.Secrets)
			require.NotContains(t, seen.Env, "API_TOKEN")
			provisions, _, _, _, _ := h.host.snapshot()
			require.Equal(t, map[string]string{"LOG_LEVEL": "info"}, provisions[0].Env)
			// The checkpoint (failed attempts are checkpointed too) is
			// redacted of every value, its JSON-escaped form and (for values
			// long enough) its encoded forms.
			cps := h.host.checkpointRequests()
			require.Len(t, cps, 1)
			require.Subset(t, cps[0].Redact, []string{secret, `a"b`, `a\"b`})
			require.ElementsMatch(t, exechost.SecretForms([]string{secret, `a"b`}), cps[0].Redact)

			// Nothing that leaves the activity carries it.
			log := h.log(t, req)
			require.NotContains(t, log, secret)
			require.Contains(t, log, "using token *** and ***")
			if tc.wantErr {
				require.Error(t, err)
				require.NotContains(t, err.Error(), secret)
				require.Contains(t, err.Error(), "bad token ***")
				var appErr *temporal.ApplicationError
				require.ErrorAs(t, err, &appErr)
				var d StepFailureDetails
				require.NoError(t, appErr.Details(&d))
				require.NotContains(t, d.StderrTail, secret)
				return
			}
			require.NoError(t, err)
			b, _ := json.Marshal(res)
			require.NotContains(t, string(b), secret)
			require.Equal(t, "***", res.Output["echo"])
			require.Equal(t, map[string]any{"***": []any{"x ***"}}, res.Output["nested"])
			require.Equal(t, "***", res.Output["quoted"])
		})
	}
}

func TestRunStepCancelTerminatesSandbox(t *testing.T) {
	h := newHarness(t)
	bg, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.bg = bg
	started := make(chan struct{})
	h.host.execStarted = started
	h.host.exec = func(ctx context.Context, _ exechost.ExecRequest) (*exechost.ExecResult, error) {
		<-ctx.Done() // a long tool; the host aborts it when ctx ends
		return &exechost.ExecResult{ExitCode: -1, Aborted: true, Stderr: []byte("got SIGTERM\n")}, fmt.Errorf("exec: %w", exechost.ErrAborted)
	}
	go func() {
		<-started
		cancel()
	}()
	req := baseReq()
	_, err := h.run(t, req)
	require.Error(t, err)
	// The test environment reports the activity's context.Canceled as a
	// plain activity error; a real worker reports it as ActivityTaskCanceled
	// (covered end to end in tests/).
	require.Contains(t, err.Error(), context.Canceled.Error())

	_, _, checkpoints, terminates, live := h.host.snapshot()
	require.Empty(t, checkpoints)
	require.Len(t, terminates, 1)
	require.Zero(t, live)
	require.Contains(t, h.log(t, req), "got SIGTERM")
	require.Contains(t, h.log(t, req), "--- agentflow: attempt 1 failed: attempt canceled\n")
	require.InDelta(t, 1, testutil.ToFloat64(h.metrics.ToolInvocations.WithLabelValues("echo:1.0", "canceled", "canceled")), 0)
}

func TestRunStepGitWorkspace(t *testing.T) {
	h := newHarness(t)
	req := baseReq()
	req.Checkpoints = nil
	req.Timeout = 3 * time.Minute
	req.Git = &spec.GitWorkspace{Repository: "/srv/repo", Revision: "main"}
	_, err := h.run(t, req)
	require.NoError(t, err)
	provisions, execs, _, _, _ := h.host.snapshot()
	require.Equal(t, &exechost.GitSource{RepositoryPath: "/srv/repo", Revision: "main"}, provisions[0].Workspace.Git)
	require.Empty(t, provisions[0].Workspace.Checkpoints)
	b := BudgetFor(3 * time.Minute)
	require.Equal(t, b.ToolDeadline, execs[0].Timeout)
	require.Equal(t, b.SandboxRuntime, provisions[0].Resources.Runtime)
	n, err := testutil.GatherAndCount(h.metrics.Registry, "agentflow_sandbox_phase_duration_seconds")
	require.NoError(t, err)
	require.Equal(t, 4, n) // provision, exec, checkpoint, terminate
}

func TestTruncateKeepsUTF8Valid(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exact", 5, "exact"},
		{"abcdef", 3, "abc"},
		{"", 0, ""},
		{"héllo", 2, "h"},  // é is 2 bytes: cutting inside it drops it
		{"héllo", 3, "hé"}, // on the boundary after é
		{"日本語", 4, "日"},    // 3-byte runes
		{"日本語", 5, "日"},    // still inside 本
		{"日本語", 6, "日本"},   // boundary
		{"a🙂b", 2, "a"},    // 4-byte rune, cut after its first byte
		{"a🙂b", 4, "a"},    // cut before its last byte
		{"a🙂b", 5, "a🙂"},   // boundary
		{"🙂", 3, ""},       // nothing fits
		{strings.Repeat("é", 200), 255, strings.Repeat("é", 127)},
	}
	for _, tc := range tests {
		got := truncate(tc.in, tc.n)
		require.Equal(t, tc.want, got, "truncate(%q, %d)", tc.in, tc.n)
		require.True(t, utf8.ValidString(got), "truncate(%q, %d) = %q is not valid UTF-8", tc.in, tc.n, got)
		require.LessOrEqual(t, len(got), tc.n)
	}
}

func TestRunStepLabelsAreValidUTF8(t *testing.T) {
	h := newHarness(t)
	req := baseReq()
	req.AgentID = strings.Repeat("a", 255) + "é-rest"
	_, err := h.run(t, req)
	require.NoError(t, err)
	provisions, _, _, _, _ := h.host.snapshot()
	label := provisions[0].Labels[LabelAgentID]
	require.True(t, utf8.ValidString(label), "label %q", label)
	require.Equal(t, strings.Repeat("a", 255), label)
}
