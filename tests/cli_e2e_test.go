//go:build e2e

package tests

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/registry"
	"github.com/agentflow/agentflow/workflows"
)

const okSpec = `name: cli-ok
version: "1.0.0"
inputs:
  - {name: msg, type: string, required: true}
  - {name: n, type: number, default: 1}
steps:
  - id: first
    tool: testtool:1.0
    inputs: {mode: ok, msg: "{{ .inputs.msg }}", n: "{{ .inputs.n }}"}
  - id: second
    tool: testtool:1.0
    inputs: {mode: ok, prev: "{{ .steps.first.output.msg }}"}
outputs:
  - {name: result, value: "{{ .steps.second.output.prev }}"}
`

const failSpec = `name: cli-fail
version: "1.0.0"
steps:
  - id: good
    tool: testtool:1.0
    inputs: {mode: ok}
  - id: bad
    tool: testtool:1.0
    inputs: {mode: exit, code: 3, stderr: "cli-e2e boom on stderr"}
    depends_on: [good]
  - id: after
    tool: testtool:1.0
    inputs: {mode: ok}
    depends_on: [bad]
`

// earlyFailSpec's only secret comes from an env var (%s) the worker does
// not have.
const earlyFailSpec = `name: cli-early
version: "1.0.0"
secrets:
  - {name: api_token, source: "%s"}
steps:
  - id: needs_secret
    tool: testtool:1.0
    inputs: {mode: ok, token: "{{ .secrets.api_token }}"}
`

const sleepSpec = `name: cli-sleep
version: "1.0.0"
steps:
  - id: nap
    tool: testtool:1.0
    inputs: {mode: sleep, seconds: 120}
`

const approvalSpec = `name: cli-approval
version: "1.0.0"
steps:
  - id: prepare
    tool: testtool:1.0
    inputs: {mode: ok}
  - id: review
    approval: {prompt: "ship it?", timeout: 1h}
    depends_on: [prepare]
  - id: ship
    tool: testtool:1.0
    inputs: {mode: ok}
    depends_on: [review]
`

const unregisteredSpec = `name: cli-unreg
version: "1.0.0"
steps:
  - id: a
    tool: nope:9.9
  - id: b
    tool: missing:1.0
`

// TestCLI runs the client-side verbs end to end, in order: the registry
// first (every later run resolves testtool:1.0 through it).
func TestCLI(t *testing.T) {
	e := startCLIEnv(t)
	img := e.images["testtool"]

	t.Run("tool register/list/show/rm", func(t *testing.T) {
		code, _, errOut := e.agentctl(t, "tool", "register", "--name", "testtool", "--version", "1.0", "--image", "agentflow/tool-testtool:1.0")
		require.Equal(t, 2, code)
		require.Contains(t, errOut, "not digest-pinned")

		var tl registry.Tool
		e.mustJSON(t, &tl, "tool", "register", "--name", "testtool", "--version", "1.0", "--image", img, "--description", "misbehaves", "-o", "json")
		require.Equal(t, img, tl.Image)
		require.Contains(t, strings.ToLower(tl.Usage), "usage")

		// Same digest again: idempotent.
		code, _, _ = e.agentctl(t, "tool", "register", "--name", "testtool", "--version", "1.0", "--image", img)
		require.Equal(t, 0, code)

		// Same name:version, another image: refused.
		other := e.images["echo"]
		if other != "" && other != img {
			code, _, errOut = e.agentctl(t, "tool", "register", "--name", "testtool", "--version", "1.0", "--image", other)
			require.Equal(t, 1, code)
			require.Contains(t, errOut, "already registered")
		}

		// --version must match what the image prints.
		code, _, errOut = e.agentctl(t, "tool", "register", "--name", "testtool", "--version", "9.9", "--image", img)
		require.Equal(t, 1, code)
		require.Contains(t, errOut, `want "9.9"`)

		var tools []registry.Tool
		e.mustJSON(t, &tools, "tool", "list", "-o", "json")
		require.Len(t, tools, 1)
		require.Equal(t, "testtool:1.0", tools[0].Ref())

		code, out, _ := e.agentctl(t, "tool", "show", "testtool:1.0")
		require.Equal(t, 0, code)
		require.Contains(t, out, "USAGE")

		// A throwaway registration to remove.
		code, _, _ = e.agentctl(t, "tool", "register", "--name", "scratch", "--version", "1.0", "--image", img)
		require.Equal(t, 0, code)
		code, out, _ = e.agentctl(t, "tool", "rm", "scratch")
		require.Equal(t, 0, code)
		require.Contains(t, out, "removed scratch:1.0")
		code, _, _ = e.agentctl(t, "tool", "rm", "scratch:1.0")
		require.Equal(t, 1, code)
		code, _, _ = e.agentctl(t, "tool", "show", "scratch")
		require.Equal(t, 1, code)

		if e.real {
			// --pin resolves the local tag to the image ID it points at.
			e.mustJSON(t, &tl, "tool", "register", "--name", "pinned", "--version", "1.0", "--image", "agentflow/tool-testtool:1.0", "--pin", "-o", "json")
			require.Equal(t, img, tl.Image)
			require.Equal(t, "agentflow/tool-testtool:1.0", tl.PinnedFrom)
		}
	})

	t.Run("run --dry-run reports unregistered tools", func(t *testing.T) {
		code, _, errOut := e.agentctl(t, "run", "-f", e.writeSpec(t, "unreg", unregisteredSpec), "--dry-run")
		require.Equal(t, 2, code)
		require.Contains(t, errOut, "unregistered tools: missing:1.0, nope:9.9")

		var rep struct {
			OK    bool              `json:"ok"`
			Tools map[string]string `json:"tools"`
		}
		e.mustJSON(t, &rep, "run", "-f", e.writeSpec(t, "ok", okSpec), "--input", "msg=hi", "--dry-run", "-o", "json")
		require.True(t, rep.OK)
		require.Equal(t, img, rep.Tools["testtool:1.0"])

		code, _, errOut = e.agentctl(t, "run", "-f", e.writeSpec(t, "ok", okSpec), "--dry-run")
		require.Equal(t, 2, code)
		require.Contains(t, errOut, `input "msg" is required`)
	})

	var okID string
	t.Run("run --wait succeeds and records the digest", func(t *testing.T) {
		okID = "cli-ok-" + time.Now().Format("150405")
		var st workflows.Status
		e.mustJSON(t, &st, "run", "-f", e.writeSpec(t, "ok", okSpec), "--name", okID, "--input", "msg=hello e2e", "--wait", "-o", "json")
		require.Equal(t, workflows.RunSucceeded, st.Status)
		require.Equal(t, "hello e2e", st.Outputs["result"])
		for _, r := range st.StepHistory {
			require.Equal(t, img, r.Image, "step %s must run the resolved digest", r.ID)
		}

		// Plain progress lines when not a terminal.
		code, out, _ := e.agentctl(t, "run", "-f", e.writeSpec(t, "ok", okSpec), "--input", "msg=again", "--wait")
		require.Equal(t, 0, code)
		require.Contains(t, out, "step first success")
		require.Contains(t, out, "step second success")
		require.Contains(t, out, "SUCCEEDED")

		var doc workflows.Status
		e.mustJSON(t, &doc, "inspect", okID)
		require.Equal(t, okID, doc.ID)
		require.Equal(t, "2/2", doc.Progress)
		require.Equal(t, "cli-ok", doc.Name)
	})

	var failID string
	t.Run("failing run exits 1, logs and inspect show why", func(t *testing.T) {
		failID = "cli-fail-" + time.Now().Format("150405")
		code, out, errOut := e.agentctl(t, "run", "-f", e.writeSpec(t, "fail", failSpec), "--name", failID, "--wait")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, "ended FAILED")
		require.Contains(t, out, "step after skipped (upstream_failed)")

		var doc workflows.Status
		e.mustJSON(t, &doc, "inspect", failID)
		require.Equal(t, workflows.RunFailed, doc.Status)

		code, out, _ = e.agentctl(t, "logs", failID, "--step", "bad", "--log-dir", e.logDir)
		require.Equal(t, 0, code)
		require.Contains(t, out, "cli-e2e boom on stderr")
		code, _, _ = e.agentctl(t, "logs", failID, "--step", "nope", "--log-dir", e.logDir)
		require.Equal(t, 1, code)
		// -f on a closed run prints what is there and returns.
		code, out, _ = e.agentctl(t, "logs", failID, "--step", "bad", "-f", "--tail", "1", "--log-dir", e.logDir)
		require.Equal(t, 0, code)
		require.Contains(t, out, "==> bad attempt 1")
	})

	t.Run("a step that fails before its sandbox exists still has a log line", func(t *testing.T) {
		// The secret's source is unset on the worker: the attempt fails in
		// secret resolution, before any sandbox. agentctl logs must still
		// show the attempt and why it failed (one exit path in RunStep).
		id := "cli-early-" + time.Now().Format("150405")
		src := fmt.Sprintf("env://AF_CLI_E2E_UNSET_%d", os.Getpid())
		code, _, errOut := e.agentctl(t, "run", "-f", e.writeSpec(t, "early", fmt.Sprintf(earlyFailSpec, src)), "--name", id, "--wait")
		require.Equal(t, 1, code, errOut)
		code, out, _ := e.agentctl(t, "logs", id, "--step", "needs_secret", "--log-dir", e.logDir)
		require.Equal(t, 0, code)
		require.Contains(t, out, "--- agentflow: attempt 1 failed: ")
		require.Contains(t, out, "api_token", "the failure line names the secret")
	})

	t.Run("resume", func(t *testing.T) {
		code, _, errOut := e.agentctl(t, "resume", okID, "--from-step", "nope")
		require.Equal(t, 2, code)
		require.Contains(t, errOut, `no step "nope"`)

		var prev workflows.Status
		e.mustJSON(t, &prev, "inspect", okID)
		var st workflows.Status
		e.mustJSON(t, &st, "resume", okID, "--from-step", "second", "--wait", "-o", "json")
		require.Equal(t, workflows.RunSucceeded, st.Status)
		require.Equal(t, prev.RunID, st.ResumedFrom)
		require.NotEqual(t, prev.RunID, st.RunID)
		carried := map[string]bool{}
		for _, r := range st.StepHistory {
			carried[r.ID] = r.Carried
		}
		require.Equal(t, map[string]bool{"first": true, "second": false}, carried)
		require.Equal(t, "hello e2e", st.Outputs["result"])
		code, _, errOut = e.agentctl(t, "resume", okID)
		require.Equal(t, 2, code)
		require.Contains(t, errOut, "nothing to resume")

		// Without --from-step: re-runs the failed step and its descendant,
		// carries the good one, and fails again (the tool still exits 3).
		code, _, _ = e.agentctl(t, "resume", failID, "--wait")
		require.Equal(t, 1, code)
		var again workflows.Status
		e.mustJSON(t, &again, "inspect", failID)
		require.NotEmpty(t, again.ResumedFrom)
		for _, r := range again.StepHistory {
			require.Equal(t, r.ID == "good", r.Carried, "step %s", r.ID)
		}
	})

	t.Run("approve", func(t *testing.T) {
		id := "cli-approval-" + time.Now().Format("150405")
		code, _, _ := e.agentctl(t, "run", "-f", e.writeSpec(t, "approval", approvalSpec), "--name", id)
		require.Equal(t, 0, code)
		code, _, _ = e.agentctl(t, "approve", "no-such-agent", "--step", "review")
		require.Equal(t, 1, code)
		code, _, _ = e.agentctl(t, "approve", id, "--step", "prepare")
		require.Equal(t, 2, code)
		code, _, _ = e.agentctl(t, "approve", id, "--step", "review", "--comment", "lgtm")
		require.Equal(t, 0, code)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		require.NoError(t, e.client.GetWorkflow(ctx, id, "").Get(ctx, nil))
		var doc workflows.Status
		e.mustJSON(t, &doc, "inspect", id)
		require.Equal(t, workflows.RunSucceeded, doc.Status)
		for _, r := range doc.StepHistory {
			if r.ID == "review" {
				require.Equal(t, "lgtm", r.Comment)
			}
		}
	})

	t.Run("cancel and name conflicts", func(t *testing.T) {
		id := "cli-sleep-" + time.Now().Format("150405")
		sp := e.writeSpec(t, "sleep", sleepSpec)
		code, _, _ := e.agentctl(t, "run", "-f", sp, "--name", id)
		require.Equal(t, 0, code)
		code, _, errOut := e.agentctl(t, "run", "-f", sp, "--name", id)
		require.Equal(t, 1, code)
		require.Contains(t, errOut, "already running")
		code, _, errOut = e.agentctl(t, "resume", id)
		require.Equal(t, 1, code)
		require.Contains(t, errOut, "still running")

		require.Eventually(t, func() bool {
			v, err := e.client.QueryWorkflow(t.Context(), id, "", workflows.StatusQuery)
			if err != nil {
				return false
			}
			var st workflows.Status
			return v.Get(&st) == nil && st.CurrentStep == "nap"
		}, time.Minute, 200*time.Millisecond)

		code, out, _ := e.agentctl(t, "cancel", id, "--wait")
		require.Equal(t, 0, code)
		require.Contains(t, out, "CANCELED")
		var doc workflows.Status
		e.mustJSON(t, &doc, "inspect", id)
		require.Equal(t, workflows.RunCanceled, doc.Status)
		code, _, _ = e.agentctl(t, "cancel", id)
		require.Equal(t, 1, code)
	})

	t.Run("list with filters", func(t *testing.T) {
		type row struct {
			ID     string `json:"id"`
			Spec   string `json:"spec"`
			Status string `json:"status"`
		}
		ids := func(rows []row) []string {
			var out []string
			for _, r := range rows {
				out = append(out, r.ID)
			}
			return out
		}
		// Visibility is eventually consistent: poll until the rows appear.
		var rows []row
		require.Eventually(t, func() bool {
			rows = nil
			code, out, _ := e.agentctl(t, "list", "--filter", "status=FAILED", "-o", "json")
			return code == 0 && jsonInto(out, &rows) && cliContains(ids(rows), failID)
		}, 30*time.Second, 500*time.Millisecond)
		for _, r := range rows {
			require.Equal(t, "FAILED", r.Status)
		}

		require.Eventually(t, func() bool {
			rows = nil
			code, out, _ := e.agentctl(t, "list", "--filter", "spec=cli-ok", "-o", "json")
			return code == 0 && jsonInto(out, &rows) && len(rows) >= 3 // two runs + the resumed run of okID
		}, 30*time.Second, 500*time.Millisecond)
		for _, r := range rows {
			require.Equal(t, "cli-ok", r.Spec)
		}

		rows = nil
		e.mustJSON(t, &rows, "list", "--filter", "name=cli-fail-*", "-o", "json")
		require.NotEmpty(t, rows)
		for _, r := range rows {
			require.True(t, strings.HasPrefix(r.ID, "cli-fail-"), r.ID)
		}
		rows = nil
		e.mustJSON(t, &rows, "list", "--filter", "name=*-sleep-*", "-o", "json") // client-side glob
		require.NotEmpty(t, rows)
		for _, r := range rows {
			require.Contains(t, r.ID, "-sleep-")
		}

		code, out, _ := e.agentctl(t, "list")
		require.Equal(t, 0, code)
		require.Contains(t, out, "ID")
		require.Contains(t, out, okID)

		code, _, errOut := e.agentctl(t, "inspect", "no-such-agent")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, "not found")
	})
}

func jsonInto(s string, v any) bool { return jsonUnmarshal([]byte(s), v) == nil }

func cliContains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
