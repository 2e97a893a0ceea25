//go:build integration

package docker_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/exechost/docker/policy"
	"github.com/agentflow/agentflow/internal/testupstream"
)

const (
	proxyTag    = "agentflow/egress-proxy:latest"
	testtoolTag = "agentflow/tool-testtool:1.0"
)

// egressEnv is a host whose egress network is a network of the test's
// own, holding local upstreams: nothing leaves the machine.
type egressEnv struct {
	*env
	tool    string // testtool image ID
	net     string // the egress network (name)
	subnet  netip.Prefix
	gateway string
	up      *upstream // "upstream.test"
	other   *upstream // "other.test": listed by no rule
	// unavailable is why this pass's runtime serves no egress ("" under
	// runc; gVisor registered with --network=none gives sandboxes no
	// network at all).
	unavailable string
}

// upstream is a busybox container on the test network: httpd on 8080
// (/ answers "upstream-ok", /cgi-bin/redir redirects to other.test) and
// a sink on 9000 that appends what it receives to /tmp/got.
type upstream struct {
	id, ip string
}

// upstreamScript starts both servers; the CGI script and the sink are
// passed as environment variables to keep the quoting sane.
const upstreamScript = `set -e
mkdir -p /tmp/w/cgi-bin
echo upstream-ok > /tmp/w/index.html
printf '%s\n' "$REDIR" > /tmp/w/cgi-bin/redir
printf '%s\n' "$SINK" > /tmp/sink.sh
chmod +x /tmp/w/cgi-bin/redir /tmp/sink.sh
: > /tmp/got
httpd -f -vv -p 8080 -h /tmp/w &
exec nc -ll -p 9000 -e /tmp/sink.sh`

func setupEgress(t *testing.T, mutate func(*egressEnv, *docker.EgressOptions)) *egressEnv {
	t.Helper()
	e := setup(t)
	ctx := t.Context()
	ee := &egressEnv{env: e, tool: imageID(t, e.c, testtoolTag)}
	var err error
	ee.unavailable, err = docker.EgressUnavailable(ctx, e.c, sandboxRuntime)
	require.NoError(t, err)
	if ee.unavailable != "" {
		// The difference of this runtime, checked by
		// TestEgressRefusedUnderANetworklessRuntime; nothing else here
		// can run.
		t.Skipf("egress under sandbox runtime %s: %s", sandboxRuntime, ee.unavailable)
	}
	ee.net = fmt.Sprintf("agentflow-egress-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	_, err = e.c.NetworkCreate(ctx, ee.net, network.CreateOptions{Driver: "bridge", Labels: testLabels})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.c.NetworkRemove(context.Background(), ee.net) })
	ins, err := e.c.NetworkInspect(ctx, ee.net, network.InspectOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, ins.IPAM.Config)
	ee.subnet = netip.MustParsePrefix(ins.IPAM.Config[0].Subnet)
	ee.gateway = ins.IPAM.Config[0].Gateway
	ee.up = ee.startUpstream(t, "up")
	ee.other = ee.startUpstream(t, "other")

	opts := docker.EgressOptions{
		ProxyImage: imageID(t, e.c, proxyTag),
		Network:    ee.net,
		AllowCIDRs: []netip.Prefix{ee.subnet},
		Resolve:    map[string]string{"upstream.test": ee.up.ip, "other.test": ee.other.ip},
	}
	if mutate != nil {
		mutate(ee, &opts)
	}
	h, err := docker.New(docker.Options{Client: e.c, Store: e.sealed, KillGrace: time.Second, Runtime: sandboxRuntime, Egress: opts})
	require.NoError(t, err)
	e.host = h
	return ee
}

func (ee *egressEnv) startUpstream(t *testing.T, name string) *upstream {
	t.Helper()
	ctx := t.Context()
	cr, err := ee.c.ContainerCreate(ctx, &container.Config{
		Image: ee.base, User: "0:0", Labels: testLabels,
		Entrypoint: []string{"/bin/sh", "-c", upstreamScript},
		Env: []string{
			"REDIR=#!/bin/sh\nprintf 'HTTP/1.0 302 Found\\r\\nLocation: http://other.test:8080/stolen\\r\\n\\r\\n'",
			"SINK=#!/bin/sh\ncat >> /tmp/got",
		},
	}, &container.HostConfig{NetworkMode: container.NetworkMode(ee.net)}, nil, nil,
		fmt.Sprintf("%s-%s", ee.net, name))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = ee.c.ContainerRemove(context.Background(), cr.ID, container.RemoveOptions{Force: true})
	})
	require.NoError(t, ee.c.ContainerStart(ctx, cr.ID, container.StartOptions{}))
	ins, err := ee.c.ContainerInspect(ctx, cr.ID)
	require.NoError(t, err)
	up := &upstream{id: cr.ID, ip: ins.NetworkSettings.Networks[ee.net].IPAddress}
	// Wait until httpd answers (from inside the upstream itself).
	require.Eventually(t, func() bool {
		out, _ := ee.execIn(t, up.id, "wget -q -O- http://127.0.0.1:8080/ 2>/dev/null")
		return strings.Contains(out, "upstream-ok")
	}, 20*time.Second, 100*time.Millisecond)
	return up
}

// execIn runs a shell command in a test container (not a sandbox).
func (ee *egressEnv) execIn(t *testing.T, id, script string) (string, error) {
	ctx := context.Background()
	ex, err := ee.c.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: []string{"/bin/sh", "-c", script}, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return "", err
	}
	hj, err := ee.c.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return "", err
	}
	defer hj.Close()
	var out bytes.Buffer
	_, err = stdcopy.StdCopy(&out, io.Discard, hj.Reader)
	return out.String(), err
}

// requests is what an upstream's httpd logged (one line per request).
func (u *upstream) requests(t *testing.T, ee *egressEnv) string {
	t.Helper()
	rc, err := ee.c.ContainerLogs(context.Background(), u.id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	require.NoError(t, err)
	defer rc.Close()
	var out bytes.Buffer
	_, _ = stdcopy.StdCopy(&out, &out, rc)
	return out.String()
}

// sunk is how many bytes the upstream's sink received.
func (u *upstream) sunk(t *testing.T, ee *egressEnv) int {
	t.Helper()
	out, err := ee.execIn(t, u.id, "wc -c < /tmp/got")
	require.NoError(t, err)
	var n int
	_, err = fmt.Sscan(strings.TrimSpace(out), &n)
	require.NoError(t, err, "wc output %q", out)
	return n
}

// events collects a sandbox's egress events.
type events struct {
	mu   sync.Mutex
	list []exechost.EgressEvent
}

func (ev *events) add(e exechost.EgressEvent) {
	ev.mu.Lock()
	ev.list = append(ev.list, e)
	ev.mu.Unlock()
}

func (ev *events) all() []exechost.EgressEvent {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]exechost.EgressEvent(nil), ev.list...)
}

func (ev *events) String() string {
	var b strings.Builder
	for _, e := range ev.all() {
		fmt.Fprintf(&b, "  %s %s:%d allowed=%v reason=%q addr=%s out=%d in=%d\n", e.Kind, e.Host, e.Port, e.Allowed, e.Reason, e.Address, e.BytesOut, e.BytesIn)
	}
	return b.String()
}

// refused returns the first refused event for host, if any.
func (ev *events) refused(host string) (exechost.EgressEvent, bool) {
	for _, e := range ev.all() {
		if !e.Allowed && e.Host == host {
			return e, true
		}
	}
	return exechost.EgressEvent{}, false
}

// egressSandbox provisions a testtool sandbox with rules; it is
// terminated when the test ends (and checked gone with its proxy and
// network).
func (ee *egressEnv) egressSandbox(t *testing.T, maxBytes int64, rules ...exechost.EgressRule) (exechost.ExecutionID, *events) {
	t.Helper()
	ev := &events{}
	if maxBytes == 0 {
		maxBytes = exechost.DefaultEgressBytes
	}
	req := exechost.ProvisionRequest{ExecutionID: newID(t), Image: ee.tool, Resources: limits(), Labels: testLabels,
		Network: exechost.NetworkEgress, Egress: &exechost.EgressPolicy{Rules: rules, MaxBytes: maxBytes, Events: ev.add}}
	h := ee.host // tests may swap ee.host later
	x, err := h.Provision(t.Context(), req)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, h.Terminate(context.Background(), x.ExecutionID))
		ee.requireBoundaryGone(t, x.ExecutionID)
	})
	return x.ExecutionID, ev
}

// requireBoundaryGone: no container (sandbox or proxy) and no network of
// the execution is left.
func (ee *egressEnv) requireBoundaryGone(t *testing.T, id exechost.ExecutionID) {
	t.Helper()
	ee.requireGone(t, id)
	nets, err := ee.c.NetworkList(context.Background(), network.ListOptions{
		Filters: filters.NewArgs(filters.Arg("label", policy.LabelExecution+"="+string(id)))})
	require.NoError(t, err)
	require.Empty(t, nets, "network of %s must be gone", id)
}

type netProbe struct {
	Kind      string `json:"kind"`
	OK        bool   `json:"ok"`
	Status    int    `json:"status"`
	Error     string `json:"error"`
	Body      string `json:"body"`
	Location  string `json:"location"`
	BytesSent int64  `json:"bytes_sent"`
}

// probe runs testtool's net mode in the sandbox.
func (ee *egressEnv) probe(t *testing.T, id exechost.ExecutionID, probes ...map[string]any) []netProbe {
	t.Helper()
	in, err := json.Marshal(map[string]any{"mode": "net", "probes": probes})
	require.NoError(t, err)
	res, err := ee.host.Exec(t.Context(), id, exechost.ExecRequest{Command: []string{"/bin/tool"}, Stdin: in, Timeout: time.Minute})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "testtool: %s", res.Stderr)
	var out struct {
		Probes []netProbe `json:"probes"`
	}
	require.NoError(t, json.Unmarshal(res.Stdout, &out), "stdout %s", res.Stdout)
	require.Len(t, out.Probes, len(probes))
	for i, p := range out.Probes {
		t.Logf("probe %d %v: %+v", i, probes[i], p)
	}
	return out.Probes
}

func rule(host string, port int) exechost.EgressRule {
	return exechost.EgressRule{Host: host, Port: port}
}

// TestEgressReachesExactlyItsList: the listed host answers through the
// proxy; a host not on the list is refused with 403 (forward proxy and
// CONNECT) and never reached; the proxy's refusals arrive as events.
func TestEgressReachesExactlyItsList(t *testing.T) {
	ee := setupEgress(t, nil)
	id, ev := ee.egressSandbox(t, 0, rule("upstream.test", 8080))
	got := ee.probe(t, id,
		map[string]any{"kind": "http", "url": "http://upstream.test:8080/"},
		map[string]any{"kind": "http", "url": "http://other.test:8080/not-listed"},
		map[string]any{"kind": "connect", "target": "other.test:8080"},
		map[string]any{"kind": "connect", "target": "upstream.test:9000"}, // listed host, other port
	)
	require.True(t, got[0].OK, "listed host: %+v", got[0])
	require.Equal(t, "upstream-ok", got[0].Body)
	for i, p := range got[1:] {
		require.False(t, p.OK, "probe %d got through: %+v", i+1, p)
		require.Equal(t, 403, p.Status, "probe %d: %+v", i+1, p)
	}
	require.NotContains(t, ee.other.requests(t, ee), "not-listed", "a refused request reached the target")
	require.Zero(t, ee.up.sunk(t, ee), "a refused CONNECT reached the target")
	require.NoError(t, ee.host.Terminate(t.Context(), id)) // events are all in once Terminate returns
	_, ok := ev.refused("other.test")
	require.True(t, ok, "no refusal event for other.test:\n%s", ev)
	var allowed bool
	for _, e := range ev.all() {
		if e.Allowed && e.Host == "upstream.test" && e.Port == 8080 && e.BytesIn > 0 {
			allowed = true
			require.Equal(t, ee.up.ip+":8080", e.Address)
		}
	}
	require.True(t, allowed, "no allowed event with bytes for upstream.test:\n%s", ev)
}

// TestEgressSandboxHasNoOtherWayOut: no route past the proxy, no DNS,
// and a sandbox without egress has no network at all.
func TestEgressSandboxHasNoOtherWayOut(t *testing.T) {
	ee := setupEgress(t, nil)
	id, _ := ee.egressSandbox(t, 0, rule("upstream.test", 8080))
	got := ee.probe(t, id,
		map[string]any{"kind": "dial", "addr": ee.up.ip + ":8080"},   // the upstream's own address
		map[string]any{"kind": "dial", "addr": ee.gateway + ":8080"}, // the Docker host on the egress network
		map[string]any{"kind": "dial", "addr": "1.1.1.1:53"},
		map[string]any{"kind": "dns", "name": "example.com", "timeout_ms": 3000},
		map[string]any{"kind": "dns", "name": "upstream.test", "timeout_ms": 3000},
		map[string]any{"kind": "http", "url": "http://upstream.test:8080/"}, // control: the proxy works
	)
	for i, p := range got[:5] {
		require.False(t, p.OK, "probe %d got out: %+v", i, p)
	}
	require.True(t, got[5].OK, "control probe through the proxy: %+v", got[5])

	// A sandbox without egress cannot reach the proxy of another.
	ins, err := ee.c.ContainerInspect(t.Context(), policy.EgressProxyName(id))
	require.NoError(t, err)
	proxyIP := ins.NetworkSettings.Networks[policy.EgressNetworkName(id)].IPAddress
	require.NotEmpty(t, proxyIP)
	x, _ := ee.provision(t, func(r *exechost.ProvisionRequest) { r.Image = ee.tool })
	got = ee.probe(t, x.ExecutionID,
		map[string]any{"kind": "dial", "addr": proxyIP + ":3128"},
		map[string]any{"kind": "connect", "proxy": "http://" + proxyIP + ":3128", "target": "upstream.test:8080"},
		map[string]any{"kind": "dial", "addr": ee.up.ip + ":8080"},
	)
	for i, p := range got {
		require.False(t, p.OK, "network-none probe %d got out: %+v", i, p)
	}
}

// TestEgressAlwaysDeniedAddresses: a listed name that resolves to
// loopback, link-local (cloud metadata), the Docker host (the egress
// network's gateway) or the proxy itself is refused, even when the
// operator's allowed ranges cover it. Private ranges need an allowed CIDR.
func TestEgressAlwaysDeniedAddresses(t *testing.T) {
	ee := setupEgress(t, func(ee *egressEnv, o *docker.EgressOptions) {
		o.AllowCIDRs = append(o.AllowCIDRs, netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("169.254.0.0/16"))
		for name, addr := range map[string]string{"loop.test": "127.0.0.1", "meta.test": "169.254.169.254",
			"gw.test": ee.gateway, "zero.test": "0.0.0.0", "mapped.test": "::ffff:127.0.0.1"} {
			o.Resolve[name] = addr
		}
	})
	hosts := []string{"loop.test", "meta.test", "gw.test", "zero.test", "mapped.test"}
	var rules []exechost.EgressRule
	var probes []map[string]any
	for _, host := range hosts {
		rules = append(rules, rule(host, 80))
		probes = append(probes, map[string]any{"kind": "http", "url": "http://" + host + "/"},
			map[string]any{"kind": "connect", "target": host + ":80"})
	}
	id, ev := ee.egressSandbox(t, 0, rules...)
	got := ee.probe(t, id, probes...)
	for i, p := range got {
		require.False(t, p.OK, "probe %d (%v) got through: %+v", i, probes[i], p)
		require.Equal(t, 403, p.Status, "probe %d (%v): a refusal is a 403: %+v", i, probes[i], p)
	}
	require.NoError(t, ee.host.Terminate(t.Context(), id))
	for _, host := range hosts {
		e, ok := ev.refused(host)
		require.True(t, ok, "no refusal for %s:\n%s", host, ev)
		require.NotContains(t, e.Reason, "not on the step's egress list", "%s: refused for the wrong reason", host)
	}

	// Without an allowed range, a private upstream is refused.
	ee2 := setupEgress(t, func(_ *egressEnv, o *docker.EgressOptions) { o.AllowCIDRs = nil })
	id2, ev2 := ee2.egressSandbox(t, 0, rule("upstream.test", 8080))
	got = ee2.probe(t, id2, map[string]any{"kind": "http", "url": "http://upstream.test:8080/private"})
	require.False(t, got[0].OK)
	require.NotContains(t, ee2.up.requests(t, ee2), "private")
	require.NoError(t, ee2.host.Terminate(t.Context(), id2))
	_, ok := ev2.refused("upstream.test")
	require.True(t, ok, "no refusal:\n%s", ev2)
}

// TestEgressSNIMustNameTheConnectHost: a TLS ClientHello through a
// CONNECT tunnel must carry the CONNECT host as SNI; another name, or
// none, is cut before a byte reaches the upstream.
func TestEgressSNIMustNameTheConnectHost(t *testing.T) {
	ee := setupEgress(t, nil)
	id, ev := ee.egressSandbox(t, 0, rule("upstream.test", 9000))
	got := ee.probe(t, id,
		map[string]any{"kind": "connect", "target": "upstream.test:9000", "tls": true, "sni": "evil.example.com"},
		map[string]any{"kind": "connect", "target": "upstream.test:9000", "tls": true, "sni": "-"},
	)
	for i, p := range got {
		require.False(t, p.OK, "probe %d: %+v", i, p)
	}
	require.NoError(t, ee.host.Terminate(t.Context(), id))
	require.Zero(t, ee.up.sunk(t, ee), "the ClientHello reached the upstream")
	var reasons []string
	for _, e := range ev.all() {
		if !e.Allowed {
			reasons = append(reasons, e.Reason)
		}
	}
	require.Len(t, reasons, 2, "events:\n%s", ev)
	require.Contains(t, reasons[0]+reasons[1], `SNI "evil.example.com" differs`)
	require.Contains(t, reasons[0]+reasons[1], "without SNI")
}

// TestEgressRedirectIsNotFollowed: the proxy hands a redirect to the
// tool; following it is a new request, refused like any other.
func TestEgressRedirectIsNotFollowed(t *testing.T) {
	ee := setupEgress(t, nil)
	id, _ := ee.egressSandbox(t, 0, rule("upstream.test", 8080))
	got := ee.probe(t, id,
		map[string]any{"kind": "http", "url": "http://upstream.test:8080/cgi-bin/redir"},
		map[string]any{"kind": "http", "url": "http://upstream.test:8080/cgi-bin/redir", "follow": true},
	)
	require.Equal(t, 302, got[0].Status, "%+v", got[0])
	require.Equal(t, "http://other.test:8080/stolen", got[0].Location)
	require.Equal(t, 403, got[1].Status, "following is refused: %+v", got[1])
	require.NotContains(t, ee.other.requests(t, ee), "stolen", "the redirect target was reached")
}

// TestEgressByteBudgetCutsUpload: bytes beyond max_egress are not sent;
// the connection is cut and the event says why.
func TestEgressByteBudgetCutsUpload(t *testing.T) {
	ee := setupEgress(t, nil)
	const budget = 64 << 10
	id, ev := ee.egressSandbox(t, budget, rule("upstream.test", 9000))
	got := ee.probe(t, id, map[string]any{"kind": "connect", "target": "upstream.test:9000", "send_bytes": 4 << 20})
	require.False(t, got[0].OK, "%+v", got[0])
	require.NoError(t, ee.host.Terminate(t.Context(), id))
	n := ee.up.sunk(t, ee)
	require.LessOrEqual(t, n, budget, "the upstream received more than max_egress")
	var cut bool
	for _, e := range ev.all() {
		cut = cut || strings.Contains(e.Reason, "max_egress")
	}
	require.True(t, cut, "no max_egress event:\n%s", ev)
}

// TestEgressSandboxesAreIsolated: a second egress sandbox cannot reach
// the first, directly (it has no route but to its own network) or
// through its own proxy with a name that resolves to the first: the
// address is private and outside the operator's allowed ranges. (With a
// range allowed that covers it, a proxy would still find no route into
// another execution's network: those networks have no address on the
// host. That is not probed here: the packet would leave the machine.)
func TestEgressSandboxesAreIsolated(t *testing.T) {
	ee := setupEgress(t, nil)
	a, _ := ee.egressSandbox(t, 0, rule("upstream.test", 8080))
	ins, err := ee.c.ContainerInspect(t.Context(), policy.ContainerName(a))
	require.NoError(t, err)
	aIP := ins.NetworkSettings.Networks[policy.EgressNetworkName(a)].IPAddress
	require.NotEmpty(t, aIP)
	pins, err := ee.c.ContainerInspect(t.Context(), policy.EgressProxyName(a))
	require.NoError(t, err)
	aProxy := pins.NetworkSettings.Networks[policy.EgressNetworkName(a)].IPAddress
	// A greets whoever connects to its port 7000.
	_, err = ee.host.Exec(t.Context(), a, exechost.ExecRequest{Command: []string{"/bin/sh", "-c",
		"nc -ll -p 7000 -e /bin/echo peer-a >/dev/null 2>&1 &"}, Timeout: 10 * time.Second})
	require.NoError(t, err)

	h, err := docker.New(docker.Options{Client: ee.c, Store: ee.sealed, KillGrace: time.Second, Runtime: sandboxRuntime,
		Egress: docker.EgressOptions{ProxyImage: imageID(t, ee.c, proxyTag), Network: ee.net,
			AllowCIDRs: []netip.Prefix{ee.subnet},
			Resolve:    map[string]string{"peer.test": aIP, "peerproxy.test": aProxy}}})
	require.NoError(t, err)
	ee.host = h
	b, ev := ee.egressSandbox(t, 0, rule("peer.test", 7000), rule("peerproxy.test", 3128))
	got := ee.probe(t, b,
		map[string]any{"kind": "dial", "addr": aIP + ":7000"},
		map[string]any{"kind": "dial", "addr": aProxy + ":3128"},
		map[string]any{"kind": "connect", "target": "peer.test:7000", "banner": true},
		map[string]any{"kind": "connect", "target": "peerproxy.test:3128"},
		map[string]any{"kind": "dns", "name": policy.ContainerName(a), "timeout_ms": 3000},
	)
	for i, p := range got {
		require.False(t, p.OK, "probe %d reached the other sandbox: %+v", i, p)
		require.NotContains(t, p.Body, "peer-a")
	}
	require.NoError(t, ee.host.Terminate(t.Context(), b))
	for _, host := range []string{"peer.test", "peerproxy.test"} {
		_, ok := ev.refused(host)
		require.True(t, ok, "no refusal for %s:\n%s", host, ev)
	}
}

// TestEgressTeardown: the proxy and the network go with the sandbox on
// every path: a canceled exec, the sandbox's deadline, a sandbox killed
// from outside, and (for a dead worker) the reaper.
func TestEgressTeardown(t *testing.T) {
	ee := setupEgress(t, nil)
	ctx := t.Context()
	mk := func(h *docker.Host, runtime time.Duration) exechost.ExecutionID {
		r := limits()
		if runtime > 0 {
			r.Runtime = runtime
		}
		x, err := h.Provision(ctx, exechost.ProvisionRequest{ExecutionID: newID(t), Image: ee.tool, Resources: r, Labels: testLabels,
			Network: exechost.NetworkEgress, Egress: &exechost.EgressPolicy{Rules: []exechost.EgressRule{rule("upstream.test", 8080)}, MaxBytes: 1 << 20}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = h.Terminate(context.Background(), x.ExecutionID) })
		require.Len(t, ee.containersOf(t, x.ExecutionID), 2, "sandbox and proxy")
		return x.ExecutionID
	}

	t.Run("canceled exec", func(t *testing.T) {
		id := mk(ee.host, 0)
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := ee.host.Exec(cctx, id, exechost.ExecRequest{Command: []string{"sleep", "60"}, Timeout: time.Minute})
			done <- err
		}()
		time.Sleep(500 * time.Millisecond) // let the exec start; cancellation works at any point
		cancel()
		require.Error(t, <-done)
		require.NoError(t, ee.host.Terminate(ctx, id))
		ee.requireBoundaryGone(t, id)
	})
	t.Run("terminate on a canceled context", func(t *testing.T) {
		id := mk(ee.host, 0)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		require.NoError(t, ee.host.Terminate(cctx, id))
		ee.requireBoundaryGone(t, id)
	})
	t.Run("killed from outside", func(t *testing.T) {
		id := mk(ee.host, 0)
		done := make(chan error, 1)
		go func() {
			_, err := ee.host.Exec(ctx, id, exechost.ExecRequest{Command: []string{"sleep", "60"}, Timeout: time.Minute})
			done <- err
		}()
		require.Eventually(t, func() bool { return len(ee.containersOf(t, id)) == 2 }, 5*time.Second, 50*time.Millisecond)
		time.Sleep(300 * time.Millisecond)
		require.NoError(t, ee.c.ContainerKill(ctx, policy.ContainerName(id), "KILL"))
		err := <-done
		require.ErrorIs(t, err, exechost.ErrTerminated)
		ee.requireBoundaryGone(t, id)
	})
	t.Run("deadline", func(t *testing.T) {
		// The runtime must outlast provisioning (proxy, network, sandbox)
		// on a loaded CI machine under runsc: the deadline is what this
		// case is about, not provisioning racing it.
		id := mk(ee.host, 12*time.Second)
		require.Eventually(t, func() bool {
			nets, _ := ee.c.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", policy.LabelExecution+"="+string(id)))})
			return len(ee.containersOf(t, id)) == 0 && len(nets) == 0
		}, 90*time.Second, 200*time.Millisecond, "the host's deadline removes sandbox, proxy and network")
	})
	t.Run("dead worker, reaper", func(t *testing.T) {
		dead, err := docker.New(docker.Options{Client: ee.c, Store: ee.sealed, Owner: "dead-worker:1:1:1", Runtime: sandboxRuntime,
			Egress: docker.EgressOptions{ProxyImage: imageID(t, ee.c, proxyTag), Network: ee.net, AllowCIDRs: []netip.Prefix{ee.subnet}}})
		require.NoError(t, err)
		id := mk(dead, 0) // and the "worker" never terminates it
		reaped, err := docker.Reap(ctx, ee.c, docker.ReapOptions{Owner: ee.host.Owner(),
			Labels:     map[string]string{"agentflow.test.suite": suiteLabel},
			OwnerAlive: func(o string) bool { return o != "dead-worker:1:1:1" }})
		require.NoError(t, err)
		roles := map[string]int{}
		for _, r := range reaped {
			if r.ExecutionID == id {
				roles[r.Role]++
				require.Equal(t, "owner_gone", r.Reason)
			}
		}
		require.Equal(t, map[string]int{"": 1, policy.RoleEgressProxy: 1, policy.RoleEgressNetwork: 1}, roles, "reaped: %+v", reaped)
		ee.requireBoundaryGone(t, id)
	})
}

// TestEgressNeedsAProxyImage: a host without a proxy image refuses
// NetworkEgress before creating anything.
func TestEgressNeedsAProxyImage(t *testing.T) {
	e := setup(t)
	_, err := e.host.Provision(t.Context(), exechost.ProvisionRequest{ExecutionID: newID(t), Image: e.base, Resources: limits(), Labels: testLabels,
		Network: exechost.NetworkEgress, Egress: &exechost.EgressPolicy{Rules: []exechost.EgressRule{rule("upstream.test", 80)}, MaxBytes: 1 << 20}})
	require.ErrorIs(t, err, exechost.ErrPolicy)
	require.Contains(t, err.Error(), "serves no egress")
}

// TestEgressBrokeredHeaders: a rule with headers makes the proxy
// terminate TLS with the sandbox's own CA and set the header (replacing
// the tool's), verifying the upstream itself; a rule without headers is
// a plain tunnel the tool verifies with the bundle it was given. The
// header value is in no container's configuration, not in the sandbox's
// environment or files, and not in a checkpoint.
func TestEgressBrokeredHeaders(t *testing.T) {
	const secret = "sk-brokered-host-test-0123456789"
	ee := setupEgress(t, nil)
	up := testupstream.StartWith(t, ee.c, testupstream.Options{Network: ee.net, Labels: testLabels, NoAliases: true})
	ca := up.CAPEM()
	h, err := docker.New(docker.Options{Client: ee.c, Store: ee.sealed, KillGrace: time.Second, Runtime: sandboxRuntime,
		Egress: docker.EgressOptions{ProxyImage: imageID(t, ee.c, proxyTag), Network: ee.net,
			AllowCIDRs: []netip.Prefix{ee.subnet}, Resolve: up.Resolve(), ExtraRootsPEM: ca}})
	require.NoError(t, err)
	ee.host = h
	id, ev := ee.egressSandbox(t, 0,
		exechost.EgressRule{Host: "api.openai.com", Port: 443, Headers: map[string]string{"Authorization": "Bearer " + secret}},
		rule("techcrunch.com", 443))
	got := ee.probe(t, id,
		map[string]any{"kind": "http", "url": "https://api.openai.com/v1/chat/completions", "method": "POST",
			"body": `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "header": map[string]string{"Authorization": "Bearer forged-by-the-tool", "Content-Type": "application/json"}},
		map[string]any{"kind": "http", "url": "https://techcrunch.com/feed/"},
		map[string]any{"kind": "http", "url": "http://api.openai.com:443/"}, // plain http to a header rule
	)
	require.True(t, got[0].OK, "brokered request: %+v", got[0])
	require.True(t, got[1].OK, "plain tunnel: %+v", got[1])
	require.Equal(t, 403, got[2].Status, "headers travel over TLS only: %+v", got[2])

	rec, err := up.Recorded(t.Context())
	require.NoError(t, err)
	openai := rec.Service("openai")
	require.Len(t, openai, 1)
	require.Equal(t, []string{"Bearer " + secret}, openai[0].Header.Values("Authorization"), "the proxy's header replaces the tool's")
	feed := rec.Service("feed")
	require.Len(t, feed, 1)
	require.Empty(t, feed[0].Header.Values("Authorization"))

	// The tool never holds the value: not in its environment, its files
	// (the CA bundle included) or anything docker inspect shows.
	out := ee.sh(t, id, "cat /proc/self/environ; env; grep -r -l "+secret+" /tmp /workspace 2>/dev/null; grep -c 'PRIVATE KEY' "+policy.CABundlePath+" || true")
	require.NotContains(t, string(out.Stdout), secret)
	require.Contains(t, string(out.Stdout), "0", "no private key in the bundle")
	for _, name := range []string{policy.ContainerName(id), policy.EgressProxyName(id)} {
		_, raw, err := ee.c.ContainerInspectWithRaw(t.Context(), name, false)
		require.NoError(t, err)
		require.NotContains(t, string(raw), secret, "%s's configuration holds the header value", name)
		require.NotContains(t, string(raw), "PRIVATE KEY", "%s's configuration holds the CA key", name)
	}
	ck, err := ee.host.Checkpoint(t.Context(), id, exechost.CheckpointRequest{Reason: "test"})
	require.NoError(t, err)
	_, rc, err := ee.sealed.Get(t.Context(), ck.CheckpointID)
	require.NoError(t, err)
	content, _ := io.ReadAll(rc)
	rc.Close()
	require.NotContains(t, string(content), secret)
	require.NotContains(t, string(content), "BEGIN CERTIFICATE", "the CA bundle lives on /tmp, never in /workspace")

	require.NoError(t, ee.host.Terminate(t.Context(), id))
	kinds := map[string]bool{}
	for _, e := range ev.all() {
		require.NotContains(t, e.Reason, secret)
		if e.Allowed {
			kinds[e.Host+"/"+e.Kind] = true
		}
	}
	require.True(t, kinds["api.openai.com/mitm"], "events:\n%s", ev)
	require.True(t, kinds["techcrunch.com/connect"], "events:\n%s", ev)
}

// TestEgressCAIsOnlyForTheBrokeredHosts: the sandbox's CA is name
// constrained to the hosts of the rules with headers, so even a copy of
// it cannot vouch for another name; a rule without headers never sees it.
func TestEgressCAIsOnlyForTheBrokeredHosts(t *testing.T) {
	ee := setupEgress(t, nil)
	id, _ := ee.egressSandbox(t, 0, exechost.EgressRule{Host: "api.example.com", Port: 443, Headers: map[string]string{"X-Key": "k-0123456789"}})
	res := ee.sh(t, id, "cat "+policy.CABundlePath)
	require.Equal(t, 0, res.ExitCode)
	var found bool
	rest := res.Stdout
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		require.NoError(t, err)
		if strings.HasPrefix(c.Subject.CommonName, "agentflow egress ") {
			found = true
			require.True(t, c.IsCA)
			require.True(t, c.PermittedDNSDomainsCritical)
			require.Equal(t, []string{"api.example.com"}, c.PermittedDNSDomains)
		}
	}
	require.True(t, found, "the sandbox's CA is in its bundle")
}

// TestEgressRefusedUnderANetworklessRuntime: under a runtime registered
// without networking (gVisor with --network=none, as
// scripts/install-runsc.sh registers it here) egress is refused with the
// reason, before anything is created; never run under another runtime.
// Under runc there is no such reason.
func TestEgressRefusedUnderANetworklessRuntime(t *testing.T) {
	e := setup(t)
	reason, err := docker.EgressUnavailable(t.Context(), e.c, sandboxRuntime)
	require.NoError(t, err)
	info, err := e.c.Info(t.Context())
	require.NoError(t, err)
	networkless := slices.Contains(info.Runtimes[sandboxRuntime].Args, "--network=none")
	if !networkless {
		require.Empty(t, reason, "runtime %s has networking", sandboxRuntime)
		return
	}
	require.Contains(t, reason, "--network=none")
	h, err := docker.New(docker.Options{Client: e.c, Store: e.sealed, Runtime: sandboxRuntime,
		Egress: docker.EgressOptions{ProxyImage: imageID(t, e.c, proxyTag), Unavailable: reason}})
	require.NoError(t, err)
	id := newID(t)
	_, err = h.Provision(t.Context(), exechost.ProvisionRequest{ExecutionID: id, Image: e.base, Resources: limits(), Labels: testLabels,
		Network: exechost.NetworkEgress, Egress: &exechost.EgressPolicy{Rules: []exechost.EgressRule{rule("api.example.com", 443)}, MaxBytes: 1 << 20}})
	require.ErrorIs(t, err, exechost.ErrPolicy)
	require.Contains(t, err.Error(), "no network")
	e.requireGone(t, id)
}
