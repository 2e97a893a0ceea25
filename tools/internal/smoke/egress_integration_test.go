//go:build integration

package smoke

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/egressproxy/wire"
	"github.com/agentflow/agentflow/internal/testenv"
	"github.com/agentflow/agentflow/internal/testupstream"
	"github.com/agentflow/agentflow/internal/testupstream/server"
)

// The egress boundary from the tools' side: the tool images, in a
// container on an internal network whose only other member is the real
// egress proxy image, reach the test upstream (agentflow/test-upstream)
// through it; the proxy terminates TLS for the entries with headers and
// adds the brokered keys. The sandbox's own lifecycle (exechost/docker)
// is not used: this checks the tools, the images and the upstream
// against the proxy as the host will configure it.

const (
	proxyImage    = "agentflow/egress-proxy:latest"
	caBundlePath  = "/tmp/agentflow-egress-ca.pem"
	openAIKey     = "sk-brokered-0123456789-SECRET"
	slackBotToken = "xoxb-brokered-SECRET"
)

func TestToolsThroughEgressProxy(t *testing.T) {
	requireDocker(t)
	c := testenv.Docker(t)
	images := loadImages(t)
	for _, name := range []string{"rss-fetcher", "llm", "llm-summarizer", "slack-notifier", "smtp-sender"} {
		_, ok := images[name]
		require.True(t, ok, "no image for %s: run tools/build-images.sh", name)
	}
	_, err := c.ImageInspect(t.Context(), proxyImage)
	require.NoError(t, err, "run tools/build-images.sh egress-proxy")

	run := newRunLabel(t)
	labels := map[string]string{"agentflow.test": "1", "agentflow.test.run": run, "agentflow.test-owner": "s6-tools"}
	egressNet := createNetwork(t, c, "agentflow-smoke-egress-"+run, false, labels)
	sandboxNet := createNetwork(t, c, "agentflow-smoke-sandbox-"+run, true, labels)

	up := testupstream.StartWith(t, c, testupstream.Options{Network: egressNet, Labels: labels})
	sandboxCA, err := testupstream.NewCA()
	require.NoError(t, err)
	proxy := startProxy(t, c, labels, egressNet, sandboxNet, wire.Config{
		Version: wire.Version,
		Listen:  fmt.Sprintf(":%d", wire.ListenPort),
		Rules: []wire.Rule{
			{Host: "techcrunch.com", Port: 443},
			{Host: "api.openai.com", Port: 443, Headers: map[string]string{"Authorization": "Bearer " + openAIKey}},
			{Host: "hooks.slack.com", Port: 443},
			{Host: "slack.com", Port: 443, Headers: map[string]string{"Authorization": "Bearer " + slackBotToken}},
			{Host: "smtp.corp.com", Port: 587},
		},
		MaxBytes:         64 << 20,
		MaxConnections:   64,
		AllowCIDRs:       []string{up.Subnet},
		Resolve:          up.Resolve(),
		CACertPEM:        string(sandboxCA.CertPEM),
		CAKeyPEM:         string(sandboxCA.KeyPEM),
		UpstreamRootsPEM: string(up.CAPEM()),
		Deadline:         time.Now().Add(10 * time.Minute),
	})

	// The sandbox trusts the per-sandbox CA (terminated tunnels) and the
	// operator's CA, here the upstream's (tunnels the proxy passes through).
	bundle := append(append([]byte{}, sandboxCA.CertPEM...), up.CAPEM()...)
	proxyURL := "http://" + net.JoinHostPort(proxy.ip, fmt.Sprint(wire.ListenPort))
	env := []string{"NO_PROXY=", "no_proxy="}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
		env = append(env, k+"="+proxyURL)
	}
	for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"} {
		env = append(env, k+"="+caBundlePath)
	}
	tool := func(t *testing.T, name string, in any) (int, map[string]any, string) {
		t.Helper()
		return runTool(t, c, labels, images[name].ID, sandboxNet, env, bundle, in)
	}
	ctx := t.Context()

	t.Run("rss-fetcher fetches the feed over HTTPS through the proxy", func(t *testing.T) {
		code, out, stderr := tool(t, "rss-fetcher", map[string]any{"url": "https://techcrunch.com/feed/", "limit": 10})
		require.Equal(t, 0, code, "%v %s", out, stderr)
		require.Equal(t, "network", out["source"])
		items := out["items"].([]any)
		require.Len(t, items, len(server.FeedTitles))
		require.Equal(t, server.FeedTitles[0], items[0].(map[string]any)["title"])
	})

	t.Run("a host off the list is refused with the proxy's reason", func(t *testing.T) {
		code, out, _ := tool(t, "rss-fetcher", map[string]any{"url": "https://example.org/feed/"})
		require.Equal(t, 1, code)
		require.Contains(t, out["error"], "egress proxy refused example.org:443: 403 Forbidden")
		require.Contains(t, out["error"], "not on the step's egress list")
	})

	t.Run("llm gets a completion; the proxy adds the key", func(t *testing.T) {
		require.NoError(t, up.Reset(ctx))
		code, out, stderr := tool(t, "llm", map[string]any{"base_url": "https://api.openai.com", "model": "gpt-4o-mini",
			"prompt": "Give 3 insights.", "text": "Alpha beta gamma.\n\nDelta epsilon zeta."})
		require.Equal(t, 0, code, "%v %s", out, stderr)
		require.Equal(t, "- [Alpha beta gamma]: Alpha beta gamma.\n- [Delta epsilon zeta]: Delta epsilon zeta.", out["content"])
		require.NotContains(t, mustJSON(t, out)+stderr, "SECRET")
		rec, err := up.Recorded(ctx)
		require.NoError(t, err)
		chats := rec.Service("openai")
		require.Len(t, chats, 1)
		require.Equal(t, "Bearer "+openAIKey, chats[0].Header.Get("Authorization"))
	})

	t.Run("llm-summarizer summarizes through the API", func(t *testing.T) {
		code, out, stderr := tool(t, "llm-summarizer", map[string]any{
			"texts":  "Storage matters for grids today.\n\nPasskeys stop phishing attacks well.\n\nRobots now come on subscription plans.",
			"prompt": "Extract exactly 3 key insights.",
			"llm":    map[string]any{"base_url": "https://api.openai.com/v1", "model": "gpt-4o-mini"},
		})
		require.Equal(t, 0, code, "%v %s", out, stderr)
		require.Equal(t, "gpt-4o-mini", out["model"])
		require.Len(t, strings.Split(out["summary"].(string), "\n"), 3)
	})

	t.Run("slack-notifier posts to a webhook and to the Web API", func(t *testing.T) {
		require.NoError(t, up.Reset(ctx))
		code, out, stderr := tool(t, "slack-notifier", map[string]any{"webhook_url": "https://hooks.slack.com/services/T000/B000/smoke-secret-token",
			"channel": "C012AB3CD", "text": "📰 Daily summary generated", "blocks": `[{"type":"section","text":{"type":"mrkdwn","text":"# T\n- [A]: b"}}]`})
		require.Equal(t, 0, code, "%v %s", out, stderr)
		require.Equal(t, "webhook", out["posted"])
		require.NotContains(t, mustJSON(t, out)+stderr, "smoke-secret-token")

		code, out, stderr = tool(t, "slack-notifier", map[string]any{"api_url": "https://slack.com/api/chat.postMessage", "channel": "C012AB3CD", "text": "hi"})
		require.Equal(t, 0, code, "%v %s", out, stderr)
		require.Equal(t, "api", out["posted"])
		require.Equal(t, "1718438400.000100", out["ts"])

		rec, err := up.Recorded(ctx)
		require.NoError(t, err)
		hooks := rec.Service("webhook")
		require.Len(t, hooks, 1)
		require.Contains(t, hooks[0].Body, "Daily summary generated")
		require.Empty(t, hooks[0].Header.Get("Authorization"))
		api := rec.Service("slack-api")
		require.Len(t, api, 1)
		require.Equal(t, "Bearer "+slackBotToken, api[0].Header.Get("Authorization"))
	})

	t.Run("smtp-sender delivers through a CONNECT tunnel with STARTTLS", func(t *testing.T) {
		require.NoError(t, up.Reset(ctx))
		code, out, stderr := tool(t, "smtp-sender", map[string]any{"to": "dana@corp.com", "subject": "Re: Your billing inquiry", "body": "Refund approved.",
			"smtp": map[string]any{"host": "smtp.corp.com", "port": 587, "starttls": true}})
		require.Equal(t, 0, code, "%v %s", out, stderr)
		require.Equal(t, true, out["delivered"])
		require.Equal(t, "smtp.corp.com:587", out["server"])
		rec, err := up.Recorded(ctx)
		require.NoError(t, err)
		require.Len(t, rec.Messages, 1)
		require.True(t, rec.Messages[0].TLS)
		require.Equal(t, []string{"dana@corp.com"}, rec.Messages[0].To)

		code, out, _ = tool(t, "smtp-sender", map[string]any{"to": "dana@corp.com", "subject": "s", "body": "b", "smtp_url": "smtp://smtp.corp.com:25"})
		require.Equal(t, 1, code)
		require.Contains(t, out["error"], "egress proxy refused smtp.corp.com:25: 403 Forbidden")
	})

	// Both refusals are on the proxy's record (which may trail the tool's exit).
	denied := func(recs []wire.Record) []string {
		var out []string
		for _, r := range recs {
			if r.Type == "conn" && !r.Allowed {
				out = append(out, fmt.Sprintf("%s:%d", r.Host, r.Port))
			}
		}
		return out
	}
	recs := proxy.waitFor(t, func(recs []wire.Record) bool { return len(denied(recs)) >= 2 })
	require.ElementsMatch(t, []string{"example.org:443", "smtp.corp.com:25"}, denied(recs), "%+v", recs)
}

func createNetwork(t *testing.T, c *client.Client, name string, internal bool, labels map[string]string) string {
	t.Helper()
	_, err := c.NetworkCreate(t.Context(), name, network.CreateOptions{Driver: "bridge", Internal: internal, Labels: labels})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.NetworkRemove(ctx, name); err != nil {
			t.Errorf("remove network %s: %v", name, err)
		}
	})
	return name
}

type proxyContainer struct {
	ip      string
	mu      sync.Mutex
	recs    []wire.Record
	changed chan struct{} // closed and replaced on every record
}

func (p *proxyContainer) add(r wire.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recs = append(p.recs, r)
	close(p.changed)
	p.changed = make(chan struct{})
}

// waitFor returns the records once ok accepts them (at most a minute).
func (p *proxyContainer) waitFor(t *testing.T, ok func([]wire.Record) bool) []wire.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		p.mu.Lock()
		recs, changed := append([]wire.Record(nil), p.recs...), p.changed
		p.mu.Unlock()
		if ok(recs) {
			return recs
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("egress proxy records: %v; have %+v", ctx.Err(), recs)
		}
	}
}

// startProxy runs the egress proxy image on both networks, writes cfg to
// its stdin and waits for its ready record; its records are kept.
func startProxy(t *testing.T, c *client.Client, labels map[string]string, egressNet, sandboxNet string, cfg wire.Config) *proxyContainer {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	created, err := c.ContainerCreate(ctx,
		&container.Config{Image: proxyImage, Labels: labels, OpenStdin: true, StdinOnce: true, AttachStdin: true, AttachStdout: true, AttachStderr: true},
		&container.HostConfig{NetworkMode: container.NetworkMode(egressNet), ReadonlyRootfs: true, CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"}},
		nil, nil, "")
	require.NoError(t, err)
	id := created.ID
	p := &proxyContainer{changed: make(chan struct{})}
	read := make(chan struct{})
	var stderr bytes.Buffer
	// Cleanups run last-in first-out: remove the container, then wait
	// for the reader its removal ends.
	t.Cleanup(func() {
		<-read
		if t.Failed() {
			t.Logf("egress proxy stderr:\n%s", stderr.String())
		}
	})
	t.Cleanup(func() { removeContainer(t, c, id) })
	require.NoError(t, c.NetworkConnect(ctx, sandboxNet, id, &network.EndpointSettings{}))
	hj, err := c.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	require.NoError(t, err)
	t.Cleanup(hj.Close)
	require.NoError(t, c.ContainerStart(ctx, id, container.StartOptions{}))
	data, err := json.Marshal(cfg)
	require.NoError(t, err)
	_, err = hj.Conn.Write(data)
	require.NoError(t, err)
	require.NoError(t, hj.CloseWrite())

	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, &stderr, hj.Reader)
		pw.CloseWithError(err)
	}()
	ready := make(chan error, 1)
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			var r wire.Record
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				continue
			}
			p.add(r)
			if !sent && (r.Type == "ready" || r.Type == "fatal") {
				sent = true
				if r.Type == "fatal" {
					ready <- fmt.Errorf("egress proxy: %s", r.Reason)
				} else {
					ready <- nil
				}
			}
		}
		if !sent {
			ready <- fmt.Errorf("egress proxy exited before it was ready")
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case err := <-ready:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatalf("egress proxy not ready: %v", ctx.Err())
	}
	info, err := c.ContainerInspect(ctx, id)
	require.NoError(t, err)
	ep := info.NetworkSettings.Networks[sandboxNet]
	require.NotNil(t, ep)
	p.ip = ep.IPAddress
	return p
}

// runTool runs one tool image the way a sandbox with egress does (only
// the sandbox network, no working DNS, the proxy and CA variables, the
// bundle on /tmp), feeds it in and returns its exit code, output object
// and stderr. Unlike the sandbox the root filesystem stays writable, so
// that the bundle can be copied in before the start.
func runTool(t *testing.T, c *client.Client, labels map[string]string, image, sandboxNet string, env []string, bundle []byte, in any) (int, map[string]any, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	created, err := c.ContainerCreate(ctx,
		&container.Config{Image: image, Env: env, User: "65532:65532", WorkingDir: "/workspace", Labels: labels,
			OpenStdin: true, StdinOnce: true, AttachStdin: true, AttachStdout: true, AttachStderr: true},
		&container.HostConfig{NetworkMode: container.NetworkMode(sandboxNet), DNS: []string{"127.0.0.1"}, DNSSearch: []string{"."},
			CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"},
			Tmpfs: map[string]string{"/workspace": "uid=65532,gid=65532"}},
		nil, nil, "")
	require.NoError(t, err)
	id := created.ID
	defer removeContainer(t, c, id)

	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(caBundlePath, "/tmp/"), Mode: 0o644, Size: int64(len(bundle))}))
	_, err = tw.Write(bundle)
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	require.NoError(t, c.CopyToContainer(ctx, id, "/tmp", &tb, container.CopyToContainerOptions{}))

	hj, err := c.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	require.NoError(t, err)
	defer hj.Close()
	require.NoError(t, c.ContainerStart(ctx, id, container.StartOptions{}))
	data, err := json.Marshal(in)
	require.NoError(t, err)
	_, err = hj.Conn.Write(data)
	require.NoError(t, err)
	require.NoError(t, hj.CloseWrite())
	var stdout, stderr bytes.Buffer
	_, err = stdcopy.StdCopy(&stdout, &stderr, hj.Reader)
	require.NoError(t, err)
	waitC, errC := c.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	var code int
	select {
	case w := <-waitC:
		code = int(w.StatusCode)
	case err := <-errC:
		require.NoError(t, err)
	}
	out := decode(t, runResult{code: code, stdout: stdout.String(), stderr: stderr.String()})
	return code, out, stderr.String()
}

func removeContainer(t *testing.T, c *client.Client, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.ContainerRemove(ctx, id, container.RemoveOptions{Force: true}); err != nil && !client.IsErrNotFound(err) {
		t.Errorf("remove container %s: %v", id[:12], err)
	}
}
