//go:build e2e

package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/internal/testvault"
	"github.com/agentflow/agentflow/workflows"
)

// TestEngineGapsE2E covers what the engine suite does not: `if` skips and
// branches, resume that reuses a carried step's checkpoint, the GPU policy,
// and both seed specs (specs/complaint-handler.yaml and
// specs/daily-tech-news.yaml) running as written, offline. Subtests share
// one dev server and one in-process worker; they run in order and each
// waits for its runs, so no two workers' sandboxes overlap in time (two
// workers in one process share a reaper owner and would reap each other's
// live sandboxes as untracked).
func TestEngineGapsE2E(t *testing.T) {
	e := startEngine(t)
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000_000)
	ctl := &cliEnv{address: e.address} // agentctl verbs, in-process

	t.Run("if false skips, dependent runs, if on tool output branches", func(t *testing.T) {
		id := "e2e-if-" + suffix
		p := e.loadPlan(t, `
name: e2e-if
version: "1.0.0"
steps:
  - id: classify
    tool: testtool:1.0
    inputs: {mode: ok, kind: a}
  - id: when_a
    tool: testtool:1.0
    if: "{{ .steps.classify.output.kind == 'a' }}"
    inputs: {mode: ok, branch: "a"}
  - id: when_b
    tool: testtool:1.0
    if: "{{ .steps.classify.output.kind == 'b' }}"
    inputs: {mode: ok, branch: "b"}
  - id: when_missing
    tool: testtool:1.0
    if: "{{ .steps.classify.output.no.such.path }}"
    inputs: {mode: ok}
  - id: after_b
    tool: testtool:1.0
    depends_on: [when_b]
    inputs: {mode: ok, prev_status: "{{ .steps.when_b.status }}", prev_output: "{{ .steps.when_b.output }}"}
outputs:
  - {name: branch, value: "{{ .steps.when_a.output.branch or .steps.when_b.output.branch }}"}
`)
		run := e.start(t, id, p, nil)
		res, err := e.wait(t, run)
		require.NoError(t, err)
		require.Equal(t, workflows.RunSucceeded, res.Status)
		require.Equal(t, "a", res.Outputs["branch"])

		st := e.status(t, id)
		require.Equal(t, workflows.RunSucceeded, st.Status)
		require.Equal(t, "5/5", st.Progress)
		for _, tc := range []struct{ step, status, reason string }{
			{"classify", workflows.StepSuccess, ""},
			{"when_a", workflows.StepSuccess, ""},
			{"when_b", workflows.StepSkipped, workflows.ReasonConditionFalse},
			{"when_missing", workflows.StepSkipped, workflows.ReasonConditionFalse}, // missing path in if is falsy
			{"after_b", workflows.StepSuccess, ""},
		} {
			r := stepRecord(t, st, tc.step)
			require.Equal(t, tc.status, r.Status, tc.step)
			require.Equal(t, tc.reason, r.Reason, tc.step)
		}
		// The skipped dependency is visible to its dependent as such.
		after := stepRecord(t, st, "after_b")
		require.Equal(t, "skipped", after.Output["prev_status"])
		require.Nil(t, after.Output["prev_output"])
		require.Equal(t, "a", stepRecord(t, st, "when_a").Output["branch"])

		// A skipped step never reached a worker: no RunStep in history.
		hist := e.historyBytes(t, id, run.GetRunID())
		require.True(t, bytes.Contains(hist, []byte(`"step_id":"when_a"`)), "positive control: when_a ran")
		require.False(t, bytes.Contains(hist, []byte(`"step_id":"when_b"`)), "when_b was scheduled")
		require.False(t, bytes.Contains(hist, []byte(`"step_id":"when_missing"`)), "when_missing was scheduled")
		e.requireNoContainers(t, id)
	})

	t.Run("resume carries a step and restores its checkpoint", func(t *testing.T) {
		// B must fail in the first run and pass after resume, while the plan
		// (pinned in the first run's history) stays the same. What changes is
		// worker-side state that is read at run time: a file:// secret
		// ("gate") naming a file B must read. The operator "fixes" it between
		// the runs, as they would fix a bad credential. A writes the file the
		// fixed gate names, so B can only pass if A's checkpoint is restored
		// into B's workspace in the resumed run, where A does not run.
		gate := filepath.Join(e.secretRoot, "gate-"+suffix) // under the worker's --secret-file-root
		require.NoError(t, os.WriteFile(gate, []byte("gate-closed.txt\n"), 0o600))
		id := "e2e-resume-" + suffix
		p := e.loadPlan(t, fmt.Sprintf(`
name: e2e-resume
version: "1.0.0"
secrets:
  - {name: gate, source: "file://%s"}
steps:
  - id: a
    tool: wsfile:1.0
    inputs: {write: {a.txt: "written by a", gate-open.txt: "open"}}
  - id: b
    tool: wsfile:1.0
    depends_on: [a]
    inputs: {read: [a.txt, "{{ .secrets.gate }}"], strict: true}
  - id: c
    tool: wsfile:1.0
    depends_on: [b]
    inputs: {read: [a.txt], strict: true, write: {c.txt: "{{ .steps.b.output.files['a.txt'] }}"}}
outputs:
  - {name: c_read, value: "{{ .steps.c.output.files['a.txt'] }}"}
  - {name: a_wrote, value: "{{ .steps.a.output.written }}"}
`, gate))
		first := e.start(t, id, p, nil)
		_, err := e.wait(t, first)
		require.Error(t, err)
		st1 := e.status(t, id)
		require.Equal(t, workflows.RunFailed, st1.Status)
		a1, b1, c1 := stepRecord(t, st1, "a"), stepRecord(t, st1, "b"), stepRecord(t, st1, "c")
		require.Equal(t, workflows.StepSuccess, a1.Status)
		require.NotEmpty(t, a1.CheckpointID)
		require.Equal(t, workflows.StepFailed, b1.Status)
		require.Contains(t, b1.Error, "read ***: openat ***: no such file or directory") // the gate file name is the scrubbed secret
		require.Equal(t, workflows.StepSkipped, c1.Status)
		require.Equal(t, workflows.ReasonUpstreamFailed, c1.Reason)
		hist1 := e.historyBytes(t, id, first.GetRunID())
		require.True(t, bytes.Contains(hist1, []byte(`"step_id":"a"`)), "positive control: a ran in the first run")

		require.NoError(t, os.WriteFile(gate, []byte("gate-open.txt\n"), 0o600))
		var st2 workflows.Status
		ctl.mustJSON(t, &st2, "resume", id, "--from-step", "b", "--wait", "-o", "json")

		require.Equal(t, workflows.RunSucceeded, st2.Status)
		require.Equal(t, id, st2.ID)
		require.NotEqual(t, first.GetRunID(), st2.RunID)
		require.Equal(t, first.GetRunID(), st2.ResumedFrom)

		a2 := stepRecord(t, st2, "a")
		require.True(t, a2.Carried)
		require.Equal(t, workflows.StepSuccess, a2.Status)
		require.Equal(t, a1.Attempts, a2.Attempts, "a was not re-run")
		require.Equal(t, a1.CheckpointID, a2.CheckpointID)
		require.Equal(t, a1.StartedAt, a2.StartedAt)
		require.Equal(t, a1.Output, a2.Output)
		require.Equal(t, map[string]any{"output": a1.Output}, st2.Context["a"], "a's output is in the new run's context")
		hist2 := e.historyBytes(t, id, st2.RunID)
		require.False(t, bytes.Contains(hist2, []byte(`"step_id":"a"`)), "the resumed run scheduled a RunStep for the carried step a")
		require.True(t, bytes.Contains(hist2, []byte(`"step_id":"b"`)), "positive control: b ran in the resumed run")

		b2 := stepRecord(t, st2, "b")
		require.False(t, b2.Carried)
		require.Equal(t, workflows.StepSuccess, b2.Status)
		require.Equal(t, int32(1), b2.Attempts)
		require.NotEqual(t, a1.CheckpointID, b2.CheckpointID)
		files, _ := b2.Output["files"].(map[string]any)
		require.Equal(t, "written by a", files["a.txt"], "b did not see a's file: checkpoint not restored")
		// The gate file's name is the secret value: scrubbed from b's output.
		require.Equal(t, "open", files["***"])
		require.ElementsMatch(t, []any{"a.txt", "***"}, b2.Output["workspace_files"])

		c2 := stepRecord(t, st2, "c")
		require.Equal(t, workflows.StepSuccess, c2.Status)
		require.Equal(t, "written by a", st2.Outputs["c_read"])
		require.Equal(t, []any{"a.txt", "gate-open.txt"}, st2.Outputs["a_wrote"])
		e.requireNoContainers(t, id)
	})

	// The seed specs resolve tools through the registry, as `make run` does.
	t.Run("register the seed tools", func(t *testing.T) {
		for _, en := range seedImages(t) {
			code, _, errOut := ctl.agentctl(t, "tool", "register", "--name", en.Name, "--version", en.Version, "--image", en.ID)
			require.Equal(t, 0, code, "register %s:%s: %s", en.Name, en.Version, errOut)
		}
	})

	complaint := filepath.Join(repoRoot(t), "specs", "complaint-handler.yaml")
	t.Run("seed complaint handler: billing error with compensation", func(t *testing.T) {
		id := "e2e-complaint-001-" + suffix
		code, out, errOut := ctl.agentctl(t, "run", "-f", complaint, "--name", id, "--input", "email_id=msg-001", "--wait", "-o", "json")
		require.Equal(t, 0, code, errOut)
		var st workflows.Status
		require.NoError(t, json.Unmarshal([]byte(out), &st))
		require.Equal(t, workflows.RunSucceeded, st.Status)
		require.Equal(t, "success", st.Outputs["resolution_status"])
		requireStatuses(t, st, map[string]string{
			"fetch_email": "success", "extract_entities": "success", "validate_billing": "success",
			"send_compensation": "success", "escalate_to_human": "skipped",
		})
		require.Equal(t, workflows.ReasonConditionFalse, stepRecord(t, st, "escalate_to_human").Reason)
		ent := stepRecord(t, st, "extract_entities").Output
		require.Equal(t, "C-7890", ent["customer_id"])
		require.Equal(t, "billing_error", ent["issue_type"])
		bill := stepRecord(t, st, "validate_billing").Output
		require.NotEmpty(t, bill["compensation_plan"])
		require.InDelta(t, 30.0, bill["overcharge"], 0.001)
		sent := stepRecord(t, st, "send_compensation").Output
		require.Equal(t, []any{"user@corp.com"}, sent["to"])
		require.NotEmpty(t, sent["message_id"])
		e.requireNoContainers(t, id)
	})

	t.Run("make run demo: parallel branches and a workspace hand-off", func(t *testing.T) {
		id := "e2e-demo-" + suffix
		demo := filepath.Join(repoRoot(t), "specs", "demo.yaml")
		code, out, errOut := ctl.agentctl(t, "run", "-f", demo, "--name", id, "--wait", "-o", "json")
		require.Equal(t, 0, code, errOut)
		var st workflows.Status
		require.NoError(t, json.Unmarshal([]byte(out), &st))
		require.Equal(t, workflows.RunSucceeded, st.Status)
		requireStatuses(t, st, map[string]string{
			"fetch": "success", "summarize": "success", "headlines": "success", "render": "success", "verify": "success",
		})
		// verify reads files written by headlines and render: its workspace
		// was layered from both branches' checkpoints.
		require.Equal(t, []any{"headlines.txt", "summary.md"}, st.Outputs["handed_off"])
		files := stepRecord(t, st, "verify").Output["files"].(map[string]any)
		require.Contains(t, files["summary.md"], "# Daily Digest - ")
		require.NotEmpty(t, files["headlines.txt"])
		e.requireNoContainers(t, id)
	})

	t.Run("seed complaint handler: unknown customer escalates", func(t *testing.T) {
		id := "e2e-complaint-003-" + suffix
		code, out, _ := ctl.agentctl(t, "run", "-f", complaint, "--name", id, "--input", "email_id=msg-003", "--wait", "-o", "json")
		// validate_billing fails (C-0042 is not in the ledger) without
		// continue_on_error, so the run is FAILED although the escalation
		// branch ran: exactly what the seed spec says.
		require.Equal(t, 1, code)
		var st workflows.Status
		require.NoError(t, json.Unmarshal([]byte(out), &st))
		require.Equal(t, workflows.RunFailed, st.Status)
		requireStatuses(t, st, map[string]string{
			"fetch_email": "success", "extract_entities": "success", "validate_billing": "failed",
			"escalate_to_human": "success", "send_compensation": "skipped",
		})
		require.Equal(t, workflows.ReasonConditionFalse, stepRecord(t, st, "send_compensation").Reason)
		require.Contains(t, stepRecord(t, st, "validate_billing").Error, "C-0042")
		ticket := stepRecord(t, st, "escalate_to_human").Output
		require.NotEmpty(t, ticket["ticket_id"])
		// Known seed quirk (DECISIONS: Jinja `or` returns the first truthy
		// operand, and "skipped" is truthy).
		require.Equal(t, "skipped", st.Outputs["resolution_status"])
		e.requireNoContainers(t, id)
	})

	// The seed's webhook URL comes from vault://prod/slack/webhook: once
	// from the development vault directory, once from a KV v2 server over
	// TLS (internal/testvault: no Vault server can be built here) through
	// --vault-addr and a token file. The GPU request is ignored in both.
	t.Run("seed daily tech news with vault secret and gpu-policy ignore", func(t *testing.T) {
		const webhook = "https://hooks.slack.com/services/T0E2E/B0E2E/e2eDailyNewsS3cretW3bhook"
		const vaultToken = "hvs.e2eDailyNewsWorkerT0ken"
		variants := []struct {
			name string
			// worker returns the worker's vault flags and, after the run,
			// checks what the vault saw.
			worker   func(t *testing.T) (flags []string, after func(t *testing.T, queue string))
			gpuProbe bool
		}{
			{name: "dev vault dir", gpuProbe: true, worker: func(t *testing.T) ([]string, func(*testing.T, string)) {
				vault := filepath.Join(t.TempDir(), "vault")
				require.NoError(t, os.MkdirAll(filepath.Join(vault, "prod", "slack"), 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(vault, "prod", "slack", "webhook"), []byte(webhook+"\n"), 0o600))
				return []string{"--dev-vault-dir", vault}, func(*testing.T, string) {}
			}},
			{name: "vault kv2 over tls", worker: func(t *testing.T) ([]string, func(*testing.T, string)) {
				srv := testvault.Start(t, testvault.Options{TLS: true})
				srv.Put("", "secret", "prod/slack", map[string]any{"webhook": webhook, "other": "not-for-this-step"})
				srv.AddToken(vaultToken, "", testvault.Policy{Read: []string{"secret/data/prod/slack"}})
				tokenFile := filepath.Join(t.TempDir(), "vault-token")
				require.NoError(t, os.WriteFile(tokenFile, []byte(vaultToken+"\n"), 0o600))
				flags := []string{"--vault-addr", srv.URL, "--vault-token-file", tokenFile, "--vault-ca-cert", srv.CACertFile}
				return flags, func(t *testing.T, queue string) {
					require.Equal(t, []string{vaultToken}, srv.TokensSeen(), "the server saw the worker's token")
					reqs := srv.Requests()
					require.NotEmpty(t, reqs)
					for _, r := range reqs {
						require.Equal(t, "GET", r.Method)
						require.Equal(t, "/v1/secret/data/prod/slack", r.Path)
						require.Equal(t, 200, r.Status)
					}
					vaultOutage(t, e, srv, queue, "e2e-vault-outage-"+suffix)
				}
			}},
		}
		for i, v := range variants {
			t.Run(v.name, func(t *testing.T) {
				vaultFlags, after := v.worker(t)
				name := fmt.Sprintf("news-%d", i)
				flags := append(vaultFlags, "--secret-vault-prefix", "prod/slack", "--gpu-policy", "ignore")
				queue, logFile := e.startWorkerProcess(t, name, flags...)

				id := fmt.Sprintf("e2e-daily-news-%d-%s", i, suffix)
				news := filepath.Join(repoRoot(t), "specs", "daily-tech-news.yaml")
				code, out, errOut := ctl.agentctl(t, "run", "-f", news, "--name", id, "--task-queue", queue, "--wait", "-o", "json")
				require.Equal(t, 0, code, errOut)
				var st workflows.Status
				require.NoError(t, json.Unmarshal([]byte(out), &st))
				require.Equal(t, workflows.RunSucceeded, st.Status)
				requireStatuses(t, st, map[string]string{
					"fetch_rss": "success", "summarize_news": "success", "render_md": "success", "post_to_slack": "success",
				})
				summary, _ := stepRecord(t, st, "summarize_news").Output["summary"].(string)
				require.NotEmpty(t, summary)
				require.Equal(t, float64(len([]rune(summary))), st.Outputs["summary_length"])
				require.Equal(t, true, st.Outputs["posted_to_slack"])
				// `now` is workflow time when render_md is scheduled: between start and end.
				md, _ := stepRecord(t, st, "render_md").Output["markdown"].(string)
				require.True(t, strings.Contains(md, "Daily Tech News Summary - "+st.StartedAt.UTC().Format("2006-01-02")) ||
					strings.Contains(md, "Daily Tech News Summary - "+st.FinishedAt.UTC().Format("2006-01-02")), "markdown: %s", md)
				posted := stepRecord(t, st, "post_to_slack").Output
				require.Equal(t, true, posted["ok"])
				require.NotEmpty(t, posted["queued"])
				after(t, queue)

				// The webhook URL reached the notifier (it validates it) but no
				// record of the run: history, step logs, checkpoints, worker log;
				// nor did the Vault token.
				hist := e.historyBytes(t, id, st.RunID)
				require.False(t, bytes.Contains(hist, []byte(webhook)), "webhook URL in Temporal history")
				require.False(t, bytes.Contains(hist, []byte("e2eDailyNewsS3cretW3bhook")), "webhook token in Temporal history")
				require.False(t, bytes.Contains(hist, []byte(vaultToken)), "vault token in Temporal history")
				require.True(t, bytes.Contains(hist, []byte("{{ .secrets.slack_webhook_url }}")), "history should keep the placeholder")
				for _, dir := range []string{e.logDir, filepath.Join(e.tmp, "checkpoints-"+name)} {
					requireNotInFiles(t, dir, "e2eDailyNewsS3cretW3bhook")
					requireNotInFiles(t, dir, vaultToken)
				}
				wlog, err := os.ReadFile(logFile)
				require.NoError(t, err)
				require.NotContains(t, string(wlog), "e2eDailyNewsS3cretW3bhook")
				require.NotContains(t, string(wlog), vaultToken)

				// The GPU request was ignored with a warning, and said so to the tool.
				warned := false
				for _, line := range strings.Split(string(wlog), "\n") {
					if strings.Contains(line, "level=WARN") && strings.Contains(line, "running it without (gpu-policy ignore)") {
						require.Contains(t, line, "step_id=summarize_news")
						require.Contains(t, line, "gpus_requested=1")
						warned = true
					}
				}
				require.True(t, warned, "no gpu-policy warning in the worker log")
				e.requireNoContainers(t, id)
				if !v.gpuProbe {
					return
				}
				probeID := "e2e-gpu-ignore-" + suffix
				s := e.step("probe", "testtool", map[string]any{"mode": "echoenv", "names": []any{activities.EnvGPUIgnored}})
				s.Resources.GPUs = 1
				res, err := e.wait(t, e.startOn(t, queue, probeID, plan("e2e-gpu-ignore", s), nil))
				require.NoError(t, err)
				require.Equal(t, workflows.RunSucceeded, res.Status)
				values, _ := stepRecord(t, e.status(t, probeID), "probe").Output["values"].(map[string]any)
				require.Equal(t, "1", values[activities.EnvGPUIgnored])
				e.requireNoContainers(t, probeID)
			})
		}
	})
}

// vaultOutage: while Vault answers 503 (sealed) a step's attempt fails
// SecretUnavailable, an infrastructure failure the workflow retries; once
// Vault answers again the step gets its secret (read by the explicit
// mount/data/path form) and the run succeeds.
func vaultOutage(t *testing.T, e *engineEnv, srv *testvault.Server, queue, id string) {
	t.Helper()
	srv.FailWith(503)
	s := e.step("use", "testtool", map[string]any{"mode": "echoenv", "name": "HOOK"})
	s.Env = map[string]string{"HOOK": "{{ .secrets.hook }}"}
	s.Secrets = []string{"hook"}
	p := plan("e2e-vault-outage", s)
	p.Secrets = []spec.SecretDecl{{Name: "hook", Source: "vault://secret/data/prod/slack/webhook"}}
	run := e.startOn(t, queue, id, p, nil)
	// Vault comes back only once an attempt has failed: the retry, not the
	// client's own retries within the attempt, must bridge the outage.
	require.Eventually(t, func() bool {
		v, err := e.client.QueryWorkflow(t.Context(), id, "", workflows.StatusQuery)
		if err != nil {
			return false
		}
		var st workflows.Status
		if v.Get(&st) != nil {
			return false
		}
		for _, r := range st.StepHistory {
			if r.ID == "use" && len(r.AttemptHistory) > 0 && r.AttemptHistory[0].Status == workflows.AttemptFailed {
				return true
			}
		}
		return false
	}, 2*time.Minute, 200*time.Millisecond)
	srv.FailWith(0)
	res, err := e.wait(t, run)
	require.NoError(t, err)
	require.Equal(t, workflows.RunSucceeded, res.Status)
	r := stepRecord(t, e.status(t, id), "use")
	require.GreaterOrEqual(t, len(r.AttemptHistory), 2)
	first := r.AttemptHistory[0]
	require.Equal(t, workflows.ClassInfrastructure, first.Class)
	require.Equal(t, failure.SecretUnavailable, first.Type)
	require.Contains(t, first.Error, "503")
	require.Equal(t, workflows.AttemptSuccess, r.AttemptHistory[len(r.AttemptHistory)-1].Status)
	require.Equal(t, true, r.Output["present"], "the tool did not receive the secret")
	e.requireNoContainers(t, id)
}

// loadPlan compiles a YAML spec exactly as agentctl does (so implicit
// dependencies and defaults apply) and pins every tool to the locally
// built image of the same name, as the registry would.
func (e *engineEnv) loadPlan(t *testing.T, src string) spec.Plan {
	t.Helper()
	src = strings.Replace(src, "steps:", "defaults: {resources: {cpu: \"0.5\", memory: 128Mi, disk: 32Mi, pids: 128, max_output: 4Mi}}\nsteps:", 1)
	p, err := spec.Load("e2e.yaml", []byte(src))
	require.NoError(t, err)
	for i := range p.Steps {
		name, _, _ := strings.Cut(p.Steps[i].Tool, ":")
		require.NotEmpty(t, e.images[name], "no image for tool %s", name)
		p.Steps[i].Image = e.images[name]
	}
	return *p
}

// seedImages are the tools the seed specs use, from .data/images.json.
func seedImages(t *testing.T) []imageEntry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), ".data", "images.json"))
	require.NoError(t, err)
	var all []imageEntry
	require.NoError(t, json.Unmarshal(b, &all))
	want := map[string]bool{
		"imap-fetcher": true, "ner-model": true, "finance-api": true, "jira-creator": true, "smtp-sender": true,
		"rss-fetcher": true, "llm-summarizer": true, "md-generator": true, "slack-notifier": true,
		"wsfile": true, // the make run demo
	}
	var out []imageEntry
	for _, en := range all {
		if want[en.Name] {
			out = append(out, en)
			delete(want, en.Name)
		}
	}
	engineRequire(t, len(want) == 0, "seed tool images missing from .data/images.json: %v", want)
	return out
}

func requireStatuses(t *testing.T, st workflows.Status, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for id := range want {
		got[id] = stepRecord(t, st, id).Status
	}
	require.Equal(t, want, got)
}

func requireNotInFiles(t *testing.T, dir, needle string) {
	t.Helper()
	n := 0
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.False(t, bytes.Contains(b, []byte(needle)), "secret in %s", p)
		n++
		return nil
	}))
	require.NotZero(t, n, "positive control: %s holds files", dir)
}

// startWorkerProcess runs `agentctl worker` (a separate process, so its
// reaper owner differs from the in-process worker's) on its own task queue
// with extra flags, until the test ends. It returns the queue and the
// worker's log file.
func (e *engineEnv) startWorkerProcess(t *testing.T, name string, flags ...string) (string, string) {
	t.Helper()
	w := e.startWorkerProc(t, name, flags...)
	return w.queue, w.logPath
}

// workerProc is an `agentctl worker` process of a test.
type workerProc struct {
	cmd     *exec.Cmd
	queue   string
	logPath string
	done    chan struct{} // closed when the process has exited
}

// kill9 kills the worker with SIGKILL and waits for it to be gone.
func (w *workerProc) kill9(t *testing.T) {
	t.Helper()
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGKILL))
	<-w.done
}

// startWorkerProc is startWorkerProcess, keeping the process.
func (e *engineEnv) startWorkerProc(t *testing.T, name string, flags ...string) *workerProc {
	t.Helper()
	bin := filepath.Join(e.tmp, "agentctl")
	if _, err := os.Stat(bin); err != nil {
		build := exec.Command("go", "build", "-o", bin, "./cmd/agentctl")
		build.Dir = repoRoot(t)
		out, err := build.CombinedOutput()
		require.NoError(t, err, "build agentctl: %s", out)
	}
	queue := fmt.Sprintf("e2e-%s-%d", name, time.Now().UnixNano())
	logPath := filepath.Join(e.tmp, "worker-"+name+".log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	args := append([]string{"--address", e.address, "worker",
		"--task-queue", queue,
		"--health-addr", "-", "--metrics-addr", "-",
		"--checkpoint-dir", filepath.Join(e.tmp, "checkpoints-"+name),
		"--log-dir", e.logDir,
		"--sandbox-label", "agentflow.test=1",
		"--sandbox-label", "agentflow.e2e=" + e.runLabel,
	}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	w := &workerProc{cmd: cmd, queue: queue, logPath: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.done:
		case <-time.After(45 * time.Second):
			_ = cmd.Process.Kill()
			<-w.done
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s worker log:\n%s", name, b)
		}
	})
	// Ready when it logs that it polls.
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(logPath)
		return bytes.Contains(b, []byte(`msg="worker started"`))
	}, 2*time.Minute, 200*time.Millisecond, "worker %s did not start", name)
	return w
}
