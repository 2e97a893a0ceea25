//go:build integration

package smoke

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/testenv"
)

type image struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Tag     string `json:"tag"`
	ID      string `json:"id"`
}

// requireDocker skips without a live daemon or docker CLI, unless
// AGENTFLOW_REQUIRE_DOCKER=1 (CI), where either missing is a failure.
func requireDocker(t *testing.T) {
	t.Helper()
	testenv.Docker(t)
	_, err := exec.LookPath("docker")
	testenv.Need(t, err == nil, "docker CLI not found: %v", err)
}

func repoRoot(t *testing.T) string { return testenv.RepoRoot(t) }

func loadImages(t *testing.T) map[string]image {
	t.Helper()
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, ".data", "images.json"))
	require.NoError(t, err, "run tools/build-images.sh (make images) first")
	var list []image
	require.NoError(t, json.Unmarshal(data, &list))
	out := map[string]image{}
	for _, im := range list {
		out[im.Name] = im
		v, err := os.ReadFile(filepath.Join(root, "tools", im.Name, "VERSION"))
		require.NoError(t, err)
		require.Equal(t, strings.TrimSpace(string(v)), im.Version, "images.json is stale for %s: rerun tools/build-images.sh", im.Name)
	}
	return out
}

type runResult struct {
	code           int
	stdout, stderr string
}

// sandboxRun runs an image the way the sandbox does: read-only rootfs, no
// network, no capabilities, no-new-privileges, numeric user, tmpfs workspace.
func sandboxRun(t *testing.T, runLabel, imageID, stdin string, extra []string, args ...string) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	argv := []string{"run", "--rm", "-i",
		"--label", "agentflow.test=1", "--label", "agentflow.test.run=" + runLabel,
		"--read-only", "--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--user", "65532:65532", "--tmpfs", "/workspace:exec,uid=65532,gid=65532", "--workdir", "/workspace",
		"--memory", "256m", "--pids-limit", "64"}
	argv = append(argv, extra...)
	argv = append(argv, imageID)
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, "docker", argv...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return runResult{code: code, stdout: out.String(), stderr: errb.String()}
}

func decode(t *testing.T, r runResult) map[string]any {
	t.Helper()
	var v map[string]any
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	require.NoError(t, dec.Decode(&v), "stdout %q stderr %q", r.stdout, r.stderr)
	require.False(t, dec.More(), "exactly one JSON object on stdout: %q", r.stdout)
	return v
}

func newRunLabel(t *testing.T) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	label := hex.EncodeToString(b)
	t.Cleanup(func() {
		// --rm removes containers; this catches any a failed run left behind.
		ids, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=agentflow.test.run="+label).Output()
		if f := strings.Fields(string(ids)); len(f) > 0 {
			_ = exec.Command("docker", append([]string{"rm", "-f"}, f...)...).Run()
		}
	})
	return label
}

func TestToolImagesSmoke(t *testing.T) {
	requireDocker(t)
	images := loadImages(t)
	label := newRunLabel(t)

	secret := "https://hooks.slack.com/services/T0/B0/smoke-secret-token"
	tests := []struct {
		tool  string
		input any
		check func(t *testing.T, out map[string]any)
	}{
		{tool: "imap-fetcher", input: map[string]any{"email_id": "msg-001"}, check: func(t *testing.T, out map[string]any) {
			require.Equal(t, "user@corp.com", out["sender"])
			require.Contains(t, out["body"], "C-7890")
		}},
		{tool: "ner-model", input: map[string]any{"text": "My bill was charged $129.99. My customer ID is C-7890."}, check: func(t *testing.T, out map[string]any) {
			require.Equal(t, "C-7890", out["customer_id"])
			require.Equal(t, 129.99, out["amount"])
			require.Equal(t, "billing_error", out["issue_type"])
		}},
		{tool: "finance-api", input: map[string]any{"customer_id": "C-7890", "amount": 129.99}, check: func(t *testing.T, out map[string]any) {
			require.Contains(t, out["compensation_plan"], "INV-2024-0312")
			require.Equal(t, 30.0, out["refund"])
		}},
		{tool: "jira-creator", input: map[string]any{"summary": "Billing dispute requires review: C-0042", "description": "x"}, check: func(t *testing.T, out map[string]any) {
			require.Equal(t, "SUP-1", out["ticket_id"])
			require.Equal(t, "tickets/SUP-1.json", out["path"])
		}},
		{tool: "smtp-sender", input: map[string]any{"to": "user@corp.com", "subject": "Re: Your billing inquiry", "body": "Refund on its way."}, check: func(t *testing.T, out map[string]any) {
			require.Equal(t, "outbox/msg-1.eml", out["path"])
			require.Regexp(t, `^<[0-9a-f]+@agentflow\.local>$`, out["message_id"])
		}},
		{tool: "rss-fetcher", input: map[string]any{"url": "https://techcrunch.com/feed/", "limit": 10}, check: func(t *testing.T, out map[string]any) {
			require.Len(t, out["items"], 10)
		}},
		{tool: "llm-summarizer", input: map[string]any{"texts": "Grid storage is the bottleneck for renewables.\n\nPasskeys make phishing much harder.\n\nRobots are sold as a subscription now.", "prompt": "Extract exactly 3 key insights, max 20 words"}, check: func(t *testing.T, out map[string]any) {
			require.Len(t, strings.Split(out["summary"].(string), "\n"), 3)
		}},
		{tool: "md-generator", input: map[string]any{"title": "Daily", "content": "- [A]: b"}, check: func(t *testing.T, out map[string]any) {
			require.Equal(t, "# Daily\n\n- [A]: b\n", out["markdown"])
			require.Equal(t, "summary.md", out["path"])
		}},
		{tool: "slack-notifier", input: map[string]any{"webhook_url": secret, "channel": "C012AB3CD", "text": "hi", "blocks": "[{\"type\":\"section\",\"text\":{\"type\":\"mrkdwn\",\"text\":\"# T\n- [A]: b\"}}]"}, check: func(t *testing.T, out map[string]any) {
			require.Equal(t, true, out["ok"])
			require.Equal(t, "outbox/slack-1.json", out["queued"])
			require.Equal(t, true, out["repaired"])
		}},
		{tool: "echo", input: map[string]any{"a": 1.0, "write_input": true}, check: func(t *testing.T, out map[string]any) {
			require.Equal(t, 1.0, out["a"])
			require.Equal(t, []any{"input.json"}, out["workspace_files"])
		}},
		{tool: "wsfile", input: map[string]any{"write": map[string]any{"a/b.txt": "hello"}, "read": []any{"a/b.txt"}}, check: func(t *testing.T, out map[string]any) {
			require.Equal(t, map[string]any{"a/b.txt": "hello"}, out["files"])
		}},
		{tool: "testtool", input: map[string]any{"mode": "ok", "x": "y"}, check: func(t *testing.T, out map[string]any) {
			require.Equal(t, "y", out["x"])
		}},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			im, ok := images[tt.tool]
			require.True(t, ok, "no image for %s in images.json", tt.tool)

			r := sandboxRun(t, label, im.ID, "", nil, "--version")
			require.Equal(t, 0, r.code, r.stderr)
			require.Equal(t, im.Version+"\n", r.stdout)

			r = sandboxRun(t, label, im.ID, "", nil, "--help")
			require.Equal(t, 0, r.code, r.stderr)
			require.Contains(t, r.stdout, tt.tool+" "+im.Version)

			in, err := json.Marshal(tt.input)
			require.NoError(t, err)
			r = sandboxRun(t, label, im.ID, string(in), nil)
			require.Equal(t, 0, r.code, "stdout %q stderr %q", r.stdout, r.stderr)
			out := decode(t, r)
			require.NotContains(t, out, "error")
			tt.check(t, out)
			require.NotContains(t, r.stdout+r.stderr, "smoke-secret-token")
		})
	}
}

// TestSandboxAsToolsSeeIt checks, from inside, what the hardened flags give
// a tool, and that the images carry what the sandbox itself needs.
func TestSandboxAsToolsSeeIt(t *testing.T) {
	requireDocker(t)
	images := loadImages(t)
	label := newRunLabel(t)
	id := images["testtool"].ID

	out := decode(t, sandboxRun(t, label, id, `{"mode":"selfinspect"}`, []string{"--env", "SMOKE_SECRET=s3cr3t-value"}))
	require.Equal(t, 65532.0, out["uid"])
	require.Equal(t, 65532.0, out["gid"])
	require.Equal(t, "/workspace", out["cwd"])
	require.Equal(t, []any{"lo"}, out["interfaces"])
	status := out["status"].(map[string]any)
	require.Equal(t, "0000000000000000", status["CapEff"])
	require.Equal(t, "1", status["NoNewPrivs"])
	require.Equal(t, true, out["readonly_root"])
	require.Equal(t, true, out["workspace_writable"])
	require.Contains(t, out["env_names"], "SMOKE_SECRET")
	require.NotContains(t, mustJSON(t, out), "s3cr3t-value", "selfinspect reports env names only")

	esc := decode(t, sandboxRun(t, label, id, `{"mode":"escape"}`, nil))
	require.Equal(t, false, esc["escaped"], "%v", esc)

	// The sandbox execs these inside every tool image.
	r := sandboxRun(t, label, id, "", []string{"--entrypoint", "/bin/sh"}, "-c", "which sleep tar && tar --help >/dev/null 2>&1; echo ok")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "/bin/sleep")
	require.Contains(t, r.stdout, "/bin/tar")
}

// TestDemoChainsOffline runs the seed specs' steps by hand, feeding each
// output to the next step the way the spec's expressions would.
func TestDemoChainsOffline(t *testing.T) {
	requireDocker(t)
	images := loadImages(t)
	label := newRunLabel(t)
	run := func(tool string, in any) (int, map[string]any) {
		data, err := json.Marshal(in)
		require.NoError(t, err)
		r := sandboxRun(t, label, images[tool].ID, string(data), nil)
		return r.code, decode(t, r)
	}

	t.Run("complaint handler, both branches", func(t *testing.T) {
		for _, tc := range []struct {
			email      string
			wantBranch string
		}{{"msg-001", "compensate"}, {"msg-003", "escalate"}} {
			_, email := run("imap-fetcher", map[string]any{"email_id": tc.email})
			_, ents := run("ner-model", map[string]any{"text": email["body"]})
			require.Equal(t, "billing_error", ents["issue_type"])
			code, fin := run("finance-api", map[string]any{"customer_id": ents["customer_id"], "amount": ents["amount"]})
			if tc.wantBranch == "compensate" {
				require.Equal(t, 0, code, "%v", fin)
				code, sent := run("smtp-sender", map[string]any{"to": email["sender"], "subject": "Re: Your billing inquiry", "body": fin["compensation_plan"]})
				require.Equal(t, 0, code, "%v", sent)
			} else {
				require.NotEqual(t, 0, code)
				require.Contains(t, fin["error"], "not found in ledger")
				code, tk := run("jira-creator", map[string]any{"summary": "Billing dispute requires review: " + ents["customer_id"].(string), "description": email["body"]})
				require.Equal(t, 0, code, "%v", tk)
			}
		}
	})

	t.Run("daily tech news", func(t *testing.T) {
		_, feed := run("rss-fetcher", map[string]any{"url": "https://techcrunch.com/feed/", "limit": 10})
		var contents []string
		for _, it := range feed["items"].([]any) {
			contents = append(contents, it.(map[string]any)["content"].(string))
		}
		_, sum := run("llm-summarizer", map[string]any{"texts": strings.Join(contents, "\n\n"),
			"prompt": "You are a senior tech journalist. Extract exactly 3 key insights from the following news articles. Format each insight as: - [Insight title]: [Concise explanation, max 20 words]. Do not add introduction or conclusion."})
		lines := strings.Split(sum["summary"].(string), "\n")
		require.Len(t, lines, 3)
		for _, l := range lines {
			require.Regexp(t, `^- \[[^\]]+\]: .+`, l)
		}
		_, md := run("md-generator", map[string]any{"title": "Daily Tech News Summary - 2024-06-15", "content": sum["summary"]})
		// The seed pastes the markdown into a JSON string template as is.
		blocks := `[ { "type": "section", "text": { "type": "mrkdwn", "text": "` + md["markdown"].(string) + `" } } ]`
		code, slack := run("slack-notifier", map[string]any{"webhook_url": "https://hooks.slack.com/services/T/B/x", "channel": "C012AB3CD", "text": "📰 Daily summary generated", "blocks": blocks})
		require.Equal(t, 0, code, "%v", slack)
		require.Equal(t, true, slack["ok"])
	})
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestMisbehaviourUnderLimits checks that the resource modes report what
// the limits did to them (the sandbox's own tests assert the limits).
func TestMisbehaviourUnderLimits(t *testing.T) {
	requireDocker(t)
	images := loadImages(t)
	label := newRunLabel(t)
	id := images["testtool"].ID

	// A later --tmpfs for the same path replaces the default one.
	disk := decode(t, sandboxRun(t, label, id, `{"mode":"diskfill"}`, []string{"--tmpfs", "/workspace:uid=65532,gid=65532,size=4m"}))
	require.Equal(t, true, disk["enospc"], "%v", disk)
	require.Equal(t, float64(4<<20), disk["bytes_written"])

	fork := decode(t, sandboxRun(t, label, id, `{"mode":"forkbomb","hold_seconds":0}`, []string{"--pids-limit", "32"}))
	require.Equal(t, true, fork["limited"], "%v", fork)
	require.Less(t, fork["spawned"], 32.0)

	r := sandboxRun(t, label, id, `{"mode":"memhog","mib":200}`, []string{"--memory", "64m", "--memory-swap", "64m"})
	require.Equal(t, 137, r.code, "OOM-killed: %q", r.stdout)
}
