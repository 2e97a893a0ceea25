//go:build e2e

package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/internal/testupstream"
	"github.com/agentflow/agentflow/workflows"
)

// The egress boundary end to end: a worker process with egress on a
// Docker network of the test's own, where the test upstream
// (agentflow/test-upstream) serves techcrunch.com, api.openai.com,
// slack.com, hooks.slack.com and smtp.corp.com with a certificate of a
// test CA (--egress-resolve, --egress-allow-cidr, --egress-ca-file); the
// live specs run unchanged against it. Nothing leaves the machine.

const (
	e2eOpenAIKey  = "sk-e2e-openai-0123456789-SECRET"
	e2eSlackToken = "xoxb-e2e-slack-0123456789-SECRET"
	e2eHookToken  = "hook-e2e-0123456789-SECRET"
)

type egressE2E struct {
	*engineEnv
	ctl   *cliEnv
	up    *testupstream.Upstream
	net   string
	flags []string // the egress worker's flags
	vault string
}

func startEgressE2E(t *testing.T) *egressE2E {
	t.Helper()
	e := startEngine(t)
	ee := &egressE2E{engineEnv: e, ctl: &cliEnv{address: e.address}}
	ctx := t.Context()
	labels := map[string]string{"agentflow.test": "1", "agentflow.e2e": e.runLabel}
	ee.net = "agentflow-e2e-egress-" + e.runLabel
	_, err := e.docker.NetworkCreate(ctx, ee.net, network.CreateOptions{Driver: "bridge", Labels: labels})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.docker.NetworkRemove(context.Background(), ee.net) })
	ee.up = testupstream.StartWith(t, e.docker, testupstream.Options{Network: ee.net, Labels: labels, NoAliases: true})

	caFile := filepath.Join(e.tmp, "upstream-ca.pem")
	require.NoError(t, os.WriteFile(caFile, ee.up.CAPEM(), 0o600))
	ee.vault = filepath.Join(e.tmp, "vault")
	for path, v := range map[string]string{"prod/openai/api_key": e2eOpenAIKey, "prod/slack/bot_token": e2eSlackToken, "prod/hooks/token": e2eHookToken} {
		p := filepath.Join(ee.vault, path)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte(v+"\n"), 0o600))
	}
	ee.flags = []string{"--egress-network", ee.net, "--egress-allow-cidr", ee.up.Subnet, "--egress-ca-file", caFile,
		"--dev-vault-dir", ee.vault, "--secret-vault-prefix", "prod"}
	for name, addr := range ee.up.Resolve() {
		ee.flags = append(ee.flags, "--egress-resolve", name+"="+addr)
	}
	// Names a hostile spec may list that resolve where egress never goes.
	ins, err := e.docker.NetworkInspect(ctx, ee.net, network.InspectOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, ins.IPAM.Config)
	ee.flags = append(ee.flags, "--egress-resolve", "loop.test=127.0.0.1", "--egress-resolve", "meta.test=169.254.169.254",
		"--egress-resolve", "gw.test="+ins.IPAM.Config[0].Gateway)
	return ee
}

// register registers the tools the live specs name.
func (ee *egressE2E) register(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), ".data", "images.json"))
	require.NoError(t, err)
	var all []imageEntry
	require.NoError(t, json.Unmarshal(b, &all))
	want := map[string]bool{"rss-fetcher": true, "llm-summarizer": true, "md-generator": true, "slack-notifier": true,
		"imap-fetcher": true, "ner-model": true, "finance-api": true, "jira-creator": true, "smtp-sender": true}
	for _, en := range all {
		if !want[en.Name] {
			continue
		}
		delete(want, en.Name)
		code, _, errOut := ee.ctl.agentctl(t, "tool", "register", "--name", en.Name, "--version", en.Version, "--image", en.ID)
		require.Equal(t, 0, code, "register %s:%s: %s", en.Name, en.Version, errOut)
	}
	require.Empty(t, want, "images missing from .data/images.json")
}

// requireSecretsNowhere: no secret value in the run's history, the step
// logs, the worker's checkpoints and log, or the inspect document.
func (ee *egressE2E) requireSecretsNowhere(t *testing.T, id, runID, worker string, docs ...string) {
	t.Helper()
	hist := ee.historyBytes(t, id, runID)
	wlog, err := os.ReadFile(filepath.Join(ee.tmp, "worker-"+worker+".log"))
	require.NoError(t, err)
	for _, secret := range []string{e2eOpenAIKey, e2eSlackToken, e2eHookToken} {
		require.False(t, bytes.Contains(hist, []byte(secret)), "a secret in Temporal history")
		require.NotContains(t, string(wlog), secret, "a secret in the worker's log")
		for _, d := range docs {
			require.NotContains(t, d, secret)
		}
		requireNotInFiles(t, ee.logDir, secret)
		requireNotInFiles(t, filepath.Join(ee.tmp, "checkpoints-"+worker), secret)
	}
}

func (ee *egressE2E) stepLog(t *testing.T, id, step string) string {
	t.Helper()
	code, out, errOut := ee.ctl.agentctl(t, "logs", id, "--step", step, "--log-dir", ee.logDir)
	require.Equal(t, 0, code, errOut)
	return out
}

func TestEgressE2E(t *testing.T) {
	ee := startEgressE2E(t)
	ee.register(t)
	w := ee.startWorkerProc(t, "egress", ee.flags...)
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000_000)

	t.Run("live daily tech news", func(t *testing.T) {
		require.NoError(t, ee.up.Reset(t.Context()))
		id := "e2e-live-news-" + suffix
		specFile := filepath.Join(repoRoot(t), "specs", "daily-tech-news.live.yaml")
		code, out, errOut := ee.ctl.agentctl(t, "run", "-f", specFile, "--name", id, "--task-queue", w.queue, "--wait", "-o", "json")
		require.Equal(t, 0, code, errOut)
		var st workflows.Status
		require.NoError(t, json.Unmarshal([]byte(out), &st))
		require.Equal(t, workflows.RunSucceeded, st.Status)
		requireStatuses(t, st, map[string]string{"fetch_rss": "success", "summarize_news": "success", "render_md": "success", "post_to_slack": "success"})
		require.Equal(t, true, st.Outputs["posted_to_slack"])
		require.Equal(t, []string{"api.openai.com:443 +Authorization"}, stepRecord(t, st, "summarize_news").Egress, "inspect shows egress")

		rec, err := ee.up.Recorded(t.Context())
		require.NoError(t, err)
		feed := rec.Service("feed")
		require.Len(t, feed, 1, "the feed was fetched once, over the network")
		require.True(t, feed[0].TLS)
		require.Empty(t, feed[0].Header.Values("Authorization"))
		openai := rec.Service("openai")
		require.Len(t, openai, 1)
		require.Equal(t, "Bearer "+e2eOpenAIKey, openai[0].Header.Get("Authorization"), "the brokered key reached the model")
		require.Contains(t, openai[0].Body, "senior tech journalist", "the model got the prompt")
		require.Contains(t, openai[0].Body, "Quokka Labs", "the model got the feed's content")
		slack := rec.Service("slack-api")
		require.Len(t, slack, 1)
		require.Equal(t, "Bearer "+e2eSlackToken, slack[0].Header.Get("Authorization"), "the brokered token reached Slack")
		summary, _ := stepRecord(t, st, "summarize_news").Output["summary"].(string)
		require.NotEmpty(t, summary)
		require.Contains(t, slack[0].Body, "Daily Tech News Summary", "the receiver got the rendered summary")
		first := strings.TrimSpace(strings.SplitN(summary, "\n", 2)[0])
		require.Contains(t, slack[0].Body, jsonText(first[:min(len(first), 30)]), "the receiver got the model's summary")

		log := ee.stepLog(t, id, "fetch_rss")
		require.Contains(t, log, "--- agentflow: egress connect techcrunch.com:443 allowed")
		require.Contains(t, ee.stepLog(t, id, "summarize_news"), "--- agentflow: egress mitm api.openai.com:443 allowed")
		ee.requireSecretsNowhere(t, id, st.RunID, "egress", out)
		ee.requireNoContainers(t, id)
		ee.requireNoEgressNetworks(t, id)
	})

	t.Run("live complaint handler delivers mail", func(t *testing.T) {
		require.NoError(t, ee.up.Reset(t.Context()))
		id := "e2e-live-complaint-" + suffix
		specFile := filepath.Join(repoRoot(t), "specs", "complaint-handler.live.yaml")
		code, out, errOut := ee.ctl.agentctl(t, "run", "-f", specFile, "--name", id, "--input", "email_id=msg-001",
			"--task-queue", w.queue, "--wait", "-o", "json")
		require.Equal(t, 0, code, errOut)
		var st workflows.Status
		require.NoError(t, json.Unmarshal([]byte(out), &st))
		require.Equal(t, workflows.RunSucceeded, st.Status)
		require.Equal(t, "success", st.Outputs["resolution_status"])
		sent := stepRecord(t, st, "send_compensation").Output
		require.Equal(t, true, sent["delivered"])
		rec, err := ee.up.Recorded(t.Context())
		require.NoError(t, err)
		require.Len(t, rec.Messages, 1)
		m := rec.Messages[0]
		require.Equal(t, []string{"user@corp.com"}, m.To)
		require.True(t, m.TLS, "STARTTLS through the tunnel")
		require.Contains(t, m.Data, "Re: Your billing inquiry")
		plan, _ := stepRecord(t, st, "validate_billing").Output["compensation_plan"].(string)
		require.NotEmpty(t, plan)
		require.Contains(t, m.Data, plan[:min(len(plan), 20)])
		require.Contains(t, ee.stepLog(t, id, "send_compensation"), "--- agentflow: egress connect smtp.corp.com:587 allowed")
		ee.requireNoContainers(t, id)
	})

	// A hostile tool: every way past the boundary it tries is refused,
	// each refusal is in its step's log, and nothing reaches a target;
	// the brokered header reaches the receiver without the tool holding it.
	t.Run("hostile tool", func(t *testing.T) {
		require.NoError(t, ee.up.Reset(t.Context()))
		id := "e2e-egress-hostile-" + suffix
		p := ee.loadPlan(t, fmt.Sprintf(`
name: e2e-egress-hostile
version: "1.0.0"
secrets:
  - {name: hook_token, source: "vault://prod/hooks/token"}
steps:
  - id: probe
    tool: testtool:1.0
    egress:
      - {host: "hooks.slack.com:443", headers: {Authorization: "Bearer {{ .secrets.hook_token }}"}}
    inputs:
      mode: net
      probes:
        - {kind: http, method: POST, url: "https://hooks.slack.com/services/T0/B0/x", body: '{"text":"hi"}', header: {Authorization: "Bearer forged"}}
        - {kind: connect, target: "techcrunch.com:443"}
        - {kind: http, url: "http://api.openai.com/v1/models"}
        - {kind: dial, addr: "%s:443"}
        - {kind: dns, name: "techcrunch.com", timeout_ms: 3000}
        - {kind: http, url: "https://hooks.slack.com:8443/"}
  - id: probe_more
    tool: testtool:1.0
    egress: ["loop.test:80", "meta.test:80", "gw.test:80", "techcrunch.com:443"]
    resources: {max_egress: 64Ki}
    inputs:
      mode: net
      probes:
        - {kind: http, url: "http://loop.test/"}
        - {kind: http, url: "http://meta.test/latest/meta-data/"}
        - {kind: http, url: "http://gw.test/"}
        - {kind: connect, target: "techcrunch.com:443", tls: true, sni: "api.openai.com"}
        - {kind: http, method: POST, url: "https://techcrunch.com/upload", body_bytes: 1048576}
`, ee.up.IP))
		run := ee.startOn(t, w.queue, id, p, nil)
		res, err := ee.wait(t, run)
		require.NoError(t, err)
		require.Equal(t, workflows.RunSucceeded, res.Status)
		st := ee.status(t, id)
		raw, _ := json.Marshal(stepRecord(t, st, "probe").Output)
		var out struct {
			Probes []struct {
				OK     bool   `json:"ok"`
				Status int    `json:"status"`
				Error  string `json:"error"`
			} `json:"probes"`
		}
		require.NoError(t, json.Unmarshal(raw, &out))
		require.Len(t, out.Probes, 6)
		require.True(t, out.Probes[0].OK, "the brokered request: %+v", out.Probes[0])
		for i, pr := range out.Probes[1:] {
			require.False(t, pr.OK, "probe %d got through: %+v", i+1, pr)
		}
		require.Equal(t, 403, out.Probes[1].Status)
		require.Equal(t, 403, out.Probes[2].Status)
		rawMore, _ := json.Marshal(stepRecord(t, st, "probe_more").Output)
		out.Probes = nil
		require.NoError(t, json.Unmarshal(rawMore, &out))
		require.Len(t, out.Probes, 5)
		for i, pr := range out.Probes {
			require.False(t, pr.OK, "probe_more %d got through: %+v", i, pr)
		}
		for i := range 3 {
			require.Equal(t, 403, out.Probes[i].Status, "probe_more %d: %+v", i, out.Probes[i])
		}

		// What reached the upstream: the brokered request, and of the
		// upload only what fit in max_egress (a cut, partial request).
		rec, err := ee.up.Recorded(t.Context())
		require.NoError(t, err)
		var brokered, upload []string
		for _, r := range rec.Requests {
			switch {
			case r.Host == "hooks.slack.com" && r.Path == "/services/T0/B0/x":
				brokered = append(brokered, strings.Join(r.Header.Values("Authorization"), ","))
			case r.Host == "techcrunch.com" && r.Path == "/upload":
				require.Less(t, len(r.Body), 64<<10, "the upload went past max_egress")
				upload = append(upload, r.Path)
			default:
				t.Errorf("a refused request reached the upstream: %s %s%s", r.Method, r.Host, r.Path)
			}
		}
		require.Equal(t, []string{"Bearer " + e2eHookToken}, brokered, "the brokered header reached the receiver, replacing the tool's")
		require.LessOrEqual(t, len(upload), 1)

		log := ee.stepLog(t, id, "probe")
		require.Contains(t, log, "--- agentflow: egress mitm hooks.slack.com:443 allowed")
		require.Contains(t, log, "--- agentflow: egress connect techcrunch.com:443 refused: not on the step's egress list")
		require.Contains(t, log, "--- agentflow: egress http api.openai.com:80 refused: not on the step's egress list")
		require.Contains(t, log, "--- agentflow: egress connect hooks.slack.com:8443 refused") // the listed host, another port
		more := ee.stepLog(t, id, "probe_more")
		require.Regexp(t, `--- agentflow: egress http loop\.test:80 refused: [^\n]*127\.0\.0\.1`, more)
		require.Regexp(t, `--- agentflow: egress http meta\.test:80 refused: [^\n]*169\.254\.169\.254`, more)
		require.Contains(t, more, "--- agentflow: egress http gw.test:80 refused: address "+ee.gateway(t)+" belongs to the Docker host")
		require.Contains(t, more, `--- agentflow: egress connect techcrunch.com:443 refused: tls: SNI "api.openai.com" differs from the CONNECT host`)
		require.Contains(t, more, "refused: max_egress")
		ee.requireSecretsNowhere(t, id, run.GetRunID(), "egress", string(raw))
	})

	// While a step with a brokered header runs, its sandbox holds the
	// value nowhere (environment of every process, files); canceling the
	// run removes the sandbox, its proxy and its network.
	t.Run("secret absent from the running sandbox, cancel removes the boundary", func(t *testing.T) {
		id := "e2e-egress-cancel-" + suffix
		run := ee.startOn(t, w.queue, id, ee.sleeper(t), nil)
		sandbox := ee.waitRunningSandbox(t, id)
		out := ee.execIn(t, sandbox, `cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n'; grep -rl -e "`+e2eHookToken+`" /tmp /workspace 2>/dev/null; echo END`)
		require.Contains(t, out, "HTTPS_PROXY=http://", "positive control: the tool's environment was read")
		require.Contains(t, out, "END")
		require.NotContains(t, out, e2eHookToken)
		require.Len(t, ee.boundaryOf(t, id), 2, "sandbox and proxy")

		require.NoError(t, ee.client.CancelWorkflow(t.Context(), id, ""))
		var res workflows.Result
		_ = run.Get(t.Context(), &res)
		require.Equal(t, workflows.RunCanceled, ee.status(t, id).Status)
		require.Eventually(t, func() bool { return len(ee.boundaryOf(t, id)) == 0 }, 30*time.Second, 200*time.Millisecond,
			"sandbox or proxy left after cancel")
		ee.requireNoEgressNetworks(t, id)
	})

	// kill -9 of the worker leaves the sandbox, its proxy and its network;
	// the next worker's reaper removes all three.
	t.Run("kill -9 of the worker, then the reaper", func(t *testing.T) {
		k := ee.startWorkerProc(t, "egress-kill", ee.flags...)
		id := "e2e-egress-kill-" + suffix
		ee.startOn(t, k.queue, id, ee.sleeper(t), nil)
		ee.waitRunningSandbox(t, id)
		k.kill9(t)
		require.Len(t, ee.boundaryOf(t, id), 2, "the dead worker's sandbox and proxy are still there")
		ee.startWorkerProc(t, "egress-reaper", ee.flags...) // reaps at start
		require.Eventually(t, func() bool { return len(ee.boundaryOf(t, id)) == 0 && len(ee.egressNetworks(t, id)) == 0 },
			time.Minute, 250*time.Millisecond, "the reaper left the dead worker's sandbox, proxy or network")
		_ = ee.client.TerminateWorkflow(context.Background(), id, "", "test done")
	})
}

// sleeper is a plan whose one step holds a brokered header and sleeps.
func (ee *egressE2E) sleeper(t *testing.T) spec.Plan {
	t.Helper()
	return ee.loadPlan(t, `
name: e2e-egress-sleeper
version: "1.0.0"
secrets:
  - {name: hook_token, source: "vault://prod/hooks/token"}
steps:
  - id: hold
    tool: testtool:1.0
    egress:
      - {host: "hooks.slack.com:443", headers: {Authorization: "Bearer {{ .secrets.hook_token }}"}}
    inputs: {mode: sleep, seconds: 120}
`)
}

// boundaryOf lists the sandbox and proxy containers of an agent.
func (ee *egressE2E) boundaryOf(t *testing.T, agentID string) []container.Summary {
	t.Helper()
	return ee.containers(t, agentID)
}

func (ee *egressE2E) egressNetworks(t *testing.T, agentID string) []network.Summary {
	t.Helper()
	nets, err := ee.docker.NetworkList(context.Background(), network.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", "agentflow.e2e="+ee.runLabel), filters.Arg("label", "agentflow.agent_id="+agentID))})
	require.NoError(t, err)
	return nets
}

func (ee *egressE2E) requireNoEgressNetworks(t *testing.T, agentID string) {
	t.Helper()
	require.Eventually(t, func() bool { return len(ee.egressNetworks(t, agentID)) == 0 }, 20*time.Second, 200*time.Millisecond,
		"egress network of %s left", agentID)
}

// waitRunningSandbox waits for the agent's sandbox (not its proxy) to run
// the tool and returns its container ID.
func (ee *egressE2E) waitRunningSandbox(t *testing.T, agentID string) string {
	t.Helper()
	var id string
	require.Eventually(t, func() bool {
		for _, c := range ee.containers(t, agentID) {
			if c.Labels["agentflow.role"] == "" && c.State == container.StateRunning {
				// The tool's own process, not the user "tool" that ps
				// prints for every process of the sandbox's uid.
				out := ee.execIn(t, c.ID, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '")
				if strings.Contains(out, "/bin/tool") {
					id = c.ID
					return true
				}
			}
		}
		return false
	}, time.Minute, 250*time.Millisecond, "no running sandbox of %s", agentID)
	return id
}

// execIn runs a shell command in a container as the sandbox's tool user.
func (ee *egressE2E) execIn(t *testing.T, id, script string) string {
	t.Helper()
	ctx := context.Background()
	ex, err := ee.docker.ContainerExecCreate(ctx, id, container.ExecOptions{User: "65532:65532", Cmd: []string{"/bin/sh", "-c", script},
		AttachStdout: true, AttachStderr: true})
	if err != nil {
		return ""
	}
	hj, err := ee.docker.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return ""
	}
	defer hj.Close()
	var out bytes.Buffer
	_, _ = stdcopy.StdCopy(&out, io.Discard, hj.Reader)
	return out.String()
}

// jsonText is s as it appears inside a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// gateway is the egress network's gateway: the Docker host on it.
func (ee *egressE2E) gateway(t *testing.T) string {
	t.Helper()
	ins, err := ee.docker.NetworkInspect(t.Context(), ee.net, network.InspectOptions{})
	require.NoError(t, err)
	return ins.IPAM.Config[0].Gateway
}
