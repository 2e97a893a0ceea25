//go:build e2e

package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/logstore"
	"github.com/agentflow/agentflow/internal/metrics"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/workflows"
)

// TestEngineE2E drives AgentWorkflow + RunStep + the Docker host through a
// real Temporal dev server. Subtests share one server and one worker.
func TestEngineE2E(t *testing.T) {
	e := startEngine(t)
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000_000)

	t.Run("health and metrics", func(t *testing.T) {
		resp, err := http.Get("http://" + e.health + "/healthz")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.JSONEq(t, `{"status":"ok"}`, string(body))
	})

	t.Run("linear run succeeds", func(t *testing.T) {
		id := "e2e-linear-" + suffix
		p := plan("e2e-linear",
			e.step("first", "echo", map[string]any{"msg": "{{ .inputs.greeting }}"}),
			e.step("second", "echo", map[string]any{"prev": "{{ .steps.first.output.msg }}"}, "first"),
		)
		p.Inputs = []spec.InputDecl{{Name: "greeting", Type: spec.TypeString, Required: true}}
		p.Outputs = []spec.OutputDecl{{Name: "echoed", Value: "{{ .steps.second.output.prev }}"}}
		run := e.start(t, id, p, map[string]any{"greeting": "hello"})
		res, err := e.wait(t, run)
		require.NoError(t, err)
		require.Equal(t, workflows.RunSucceeded, res.Status)
		require.Equal(t, "hello", res.Outputs["echoed"])

		st := e.status(t, id)
		require.Equal(t, workflows.RunSucceeded, st.Status)
		for _, s := range []string{"first", "second"} {
			r := stepRecord(t, st, s)
			require.Equal(t, workflows.StepSuccess, r.Status)
			require.NotEmpty(t, r.CheckpointID)
		}
		e.requireNoContainers(t, id)
	})

	t.Run("diamond join sees both branches", func(t *testing.T) {
		id := "e2e-diamond-" + suffix
		p := plan("e2e-diamond",
			e.step("root", "wsfile", map[string]any{"write": map[string]any{"root.txt": "r"}}),
			e.step("left", "wsfile", map[string]any{"write": map[string]any{"left.txt": "L"}, "read": []any{"root.txt"}, "strict": true}, "root"),
			e.step("right", "wsfile", map[string]any{"write": map[string]any{"right.txt": "R"}, "read": []any{"root.txt"}, "strict": true}, "root"),
			e.step("join", "wsfile", map[string]any{"read": []any{"root.txt", "left.txt", "right.txt"}, "strict": true}, "left", "right"),
		)
		res, err := e.wait(t, e.start(t, id, p, nil))
		require.NoError(t, err)
		require.Equal(t, workflows.RunSucceeded, res.Status)
		join := stepRecord(t, e.status(t, id), "join")
		require.Equal(t, map[string]any{"root.txt": "r", "left.txt": "L", "right.txt": "R"}, join.Output["files"])
		e.requireNoContainers(t, id)
	})

	t.Run("flaky tool recovers by retries", func(t *testing.T) {
		id := "e2e-flaky-" + suffix
		s := e.step("flaky", "testtool", map[string]any{"mode": "flaky", "until": 3})
		s.Retries = 2
		res, err := e.wait(t, e.start(t, id, plan("e2e-flaky", s), nil))
		require.NoError(t, err)
		require.Equal(t, workflows.RunSucceeded, res.Status)
		r := stepRecord(t, e.status(t, id), "flaky")
		require.Equal(t, workflows.StepSuccess, r.Status)
		require.Equal(t, int32(3), r.Attempts)
		// Every attempt left a finished log; the failed ones carry the failure.
		logs, closeLogs, err := logstore.NewDir(e.logDir, logstore.Options{})
		require.NoError(t, err)
		defer closeLogs()
		entries, err := logs.ListStep(t.Context(), id, e.status(t, id).RunID, "flaky")
		require.NoError(t, err)
		require.Len(t, entries, 3, "one log per attempt: %+v", entries)
		for i, en := range entries {
			require.Equal(t, int32(i+1), en.Key.Attempt)
			require.True(t, en.Finished, "attempt %d's log has its end marker", i+1)
			data, err := logs.Read(t.Context(), en.Key, 0)
			require.NoError(t, err)
			if i < 2 {
				require.Contains(t, string(data), fmt.Sprintf("attempt %d failed", i+1))
			}
		}
		e.requireNoContainers(t, id)
	})

	t.Run("tool failure fails the run", func(t *testing.T) {
		id := "e2e-fail-" + suffix
		s := e.step("bad", "testtool", map[string]any{"mode": "exit", "code": 3, "stderr": "something broke\n"})
		_, err := e.wait(t, e.start(t, id, plan("e2e-fail", s), nil))
		require.Error(t, err)
		st := e.status(t, id)
		require.Equal(t, workflows.RunFailed, st.Status)
		r := stepRecord(t, st, "bad")
		require.Equal(t, workflows.StepFailed, r.Status)
		require.Contains(t, r.Error, "exited with code 3")
		require.Contains(t, r.Error, "something broke")
		e.requireNoContainers(t, id)
	})

	for _, ignoreTerm := range []bool{false, true} {
		// A tool that ignores SIGTERM is destroyed with its sandbox after
		// the 5 s grace.
		t.Run(fmt.Sprintf("cancel mid-step ignore_term=%v", ignoreTerm), func(t *testing.T) {
			id := fmt.Sprintf("e2e-cancel-%v-%s", ignoreTerm, suffix)
			s := e.step("sleepy", "testtool", map[string]any{"mode": "sleep", "seconds": 300, "ignore_term": ignoreTerm})
			run := e.start(t, id, plan("e2e-cancel", s), nil)
			require.Eventually(t, func() bool { return len(e.containers(t, id)) > 0 }, 90*time.Second, 200*time.Millisecond,
				"the step's sandbox never appeared")
			require.Eventually(t, func() bool {
				return stepRecord(t, e.status(t, id), "sleepy").Status == workflows.StepRunning
			}, 30*time.Second, 200*time.Millisecond)

			canceledAt := time.Now()
			require.NoError(t, e.client.CancelWorkflow(t.Context(), id, ""))
			// Bounded wait: heartbeat + SIGTERM + 5 s grace + teardown, far
			// below the 300 s sleep.
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			err := run.Get(ctx, nil)
			require.Error(t, err)
			var canceled *temporal.CanceledError
			require.True(t, errors.As(err, &canceled), "want canceled, got %v", err)
			t.Logf("cancel took %s from request to closed run", time.Since(canceledAt).Round(time.Millisecond))

			desc, err := e.client.DescribeWorkflowExecution(t.Context(), id, "")
			require.NoError(t, err)
			require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, desc.WorkflowExecutionInfo.Status)
			st := e.status(t, id)
			require.Equal(t, workflows.RunCanceled, st.Status)
			require.Equal(t, workflows.StepCanceled, stepRecord(t, st, "sleepy").Status)
			e.requireNoContainers(t, id)
		})
	}

	t.Run("secret reaches the tool and nowhere else", func(t *testing.T) {
		const secret = "e2e-S3cr3t-d0-not-leak-7f3a"
		t.Setenv("AF_E2E_TOKEN", secret) // the worker runs in this process
		id := "e2e-secret-" + suffix
		s := e.step("use", "testtool", map[string]any{"mode": "echoenv", "name": "API_TOKEN", "token": "{{ .secrets.api_token }}"})
		s.Env = map[string]string{"API_TOKEN": "{{ .secrets.api_token }}"}
		s.Secrets = []string{"api_token"}
		p := plan("e2e-secret", s)
		p.Secrets = []spec.SecretDecl{{Name: "api_token", Source: "env://AF_E2E_TOKEN"}}

		run := e.start(t, id, p, nil)
		res, err := e.wait(t, run)
		require.NoError(t, err)
		require.Equal(t, workflows.RunSucceeded, res.Status)

		r := stepRecord(t, e.status(t, id), "use")
		require.Equal(t, true, r.Output["present"], "the tool did not receive the secret")
		require.Equal(t, "***", r.Output["value"], "the output was not scrubbed")

		hist := e.historyBytes(t, id, run.GetRunID())
		require.False(t, bytes.Contains(hist, []byte(secret)), "secret value found in Temporal history")
		require.True(t, bytes.Contains(hist, []byte("{{ .secrets.api_token }}")), "history should keep the placeholder")

		_ = filepath.WalkDir(e.logDir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(p)
				require.False(t, strings.Contains(string(b), secret), "secret in log %s", p)
			}
			return nil
		})
		e.requireNoContainers(t, id)
	})

	t.Run("secret written to the workspace is redacted in the checkpoint", func(t *testing.T) {
		const secret = "e2e-WS-s3cr3t-must-not-persist-91c2"
		t.Setenv("AF_E2E_WS_TOKEN", secret) // the worker runs in this process
		id := "e2e-ws-secret-" + suffix
		w := e.step("write", "wsfile", map[string]any{"write": map[string]any{"leak.txt": "{{ .secrets.token }}", "plain.txt": "p"}})
		w.Secrets = []string{"token"}
		r := e.step("read", "wsfile", map[string]any{"read": []any{"leak.txt", "plain.txt"}, "strict": true}, "write")
		p := plan("e2e-ws-secret", w, r)
		p.Secrets = []spec.SecretDecl{{Name: "token", Source: "env://AF_E2E_WS_TOKEN"}}

		run := e.start(t, id, p, nil)
		res, err := e.wait(t, run)
		require.NoError(t, err)
		require.Equal(t, workflows.RunSucceeded, res.Status)

		// The dependent step restored the checkpoint: same length, only '*'.
		read := stepRecord(t, e.status(t, id), "read")
		require.Equal(t, map[string]any{"leak.txt": strings.Repeat("*", len(secret)), "plain.txt": "p"}, read.Output["files"])

		// No stored checkpoint holds the value (raw bytes, uncompressed tar).
		n := 0
		require.NoError(t, filepath.WalkDir(filepath.Join(e.tmp, "checkpoints"), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			require.False(t, bytes.Contains(b, []byte(secret)), "secret value found in checkpoint file %s", p)
			n++
			return nil
		}))
		require.Positive(t, n, "no checkpoint files found")

		hist := e.historyBytes(t, id, run.GetRunID())
		require.False(t, bytes.Contains(hist, []byte(secret)), "secret value found in Temporal history")
		e.requireNoContainers(t, id)
	})

	t.Run("metrics recorded", func(t *testing.T) {
		resp, err := http.Get("http://" + e.metrics + "/metrics")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		text := string(body)
		for _, want := range []string{
			`agentflow_tool_invocations_total{reason="none",status="success",tool="echo:e2e"}`,
			`agentflow_sandbox_phase_duration_seconds_count{phase="exec",result="ok"}`,
			`agentflow_sandbox_phase_duration_seconds_count{phase="restore",result="ok"}`,
			`agentflow_step_retries_total{tool="testtool:e2e"}`,
			"agentflow_sandbox_active 0",
			`agentflow_run_finished_total{spec="e2e-linear",status="succeeded"} 1`,
			`agentflow_run_finished_total{spec="e2e-cancel",status="canceled"} 2`,
			`agentflow_tool_invocations_total{reason="exit_code",status="failed",tool="testtool:e2e"}`,
			`agentflow_tool_invocations_total{reason="canceled",status="canceled",tool="testtool:e2e"}`,
			`agentflow_run_finished_total{spec="e2e-fail",status="failed"} 1`,
			`agentflow_run_finished_total{spec="e2e-fail",status="succeeded"} 0`,
			`agentflow_run_duration_seconds_bucket{spec="e2e-linear",status="succeeded",le="300"} 1`,
			"agentflow_step_attempts_running 0",
			"agentflow_step_attempts_overdue 0",
			"temporal_activity_execution_latency",
		} {
			require.True(t, strings.Contains(text, want), "metrics lack %s", want)
		}
		// Counted in workflow code through the SDK metrics handler.
		require.Regexp(t, `(?m)^agentflow_run_started_total\{[^}]*spec="e2e-linear"[^}]*\} 1$`, text)
		// The SDK families the dashboard and alerts read
		// (deploy/grafana, deploy/prometheus) are emitted by a real worker.
		for _, name := range metrics.TemporalSDK {
			require.Regexp(t, `(?m)^`+name+`(_bucket)?\{`, text, "the worker does not export SDK metric %s", name)
		}
	})
}
