package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker/policy"
	"github.com/agentflow/agentflow/exechost/docker/runner"
	"github.com/agentflow/agentflow/internal/egressproxy/wire"
)

// The egress boundary of a NetworkEgress sandbox (docs/security/egress.md):
// a Docker network of its own (internal: no route out, no address of the
// host on it), and on it the sandbox and one proxy container, which also
// sits on the worker's egress network and lets through exactly the
// request's rules. The configuration (rules, header values, the CA key)
// reaches the proxy on its stdin, once; its records come back on its
// stdout and become EgressEvents. Terminate, a lost sandbox, a failed
// provision and the reaper all remove the proxy and the network with the
// sandbox.

// egressClient is the part of the Docker client the boundary uses.
type egressClient interface {
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	NetworkInspect(ctx context.Context, networkID string, options network.InspectOptions) (network.Inspect, error)
	NetworkConnect(ctx context.Context, networkID, containerID string, config *network.EndpointSettings) error
	NetworkRemove(ctx context.Context, networkID string) error
	ContainerAttach(ctx context.Context, containerID string, options container.AttachOptions) (types.HijackedResponse, error)
}

// Bounds of the boundary's start and of what the host reads from a proxy.
const (
	proxyReadyTimeout = 30 * time.Second
	maxRecordLine     = 64 << 10
	proxyStderrTail   = 4 << 10
	// DefaultEgressNetwork is the network proxies reach upstreams on when
	// EgressOptions.Network is empty.
	DefaultEgressNetwork = "bridge"
)

// errNoEgress: this host serves no NetworkEgress sandbox (no proxy image).
var errNoEgress = &exechost.PolicyError{Field: "network",
	Reason: "this worker serves no egress (worker --egress=false, or the egress proxy image is missing: run make images)"}

// boundary is the egress side of one execution.
type boundary struct {
	networkID   string
	networkName string
	proxyID     string
	proxyIP     string // the proxy's address on the execution's network
	ca          *egressCA
	bundle      []byte // the CAs the sandbox trusts (PEM)
	attach      *types.HijackedResponse
	records     *proxyRecords
	closeOnce   sync.Once
}

// prepareBoundary creates the execution's network and, when a rule
// carries headers, the sandbox's CA; it computes the bundle the sandbox
// trusts. The proxy is started by startProxy (concurrently with the
// sandbox). On error nothing of it is left.
func (h *Host) prepareBoundary(ctx context.Context, req exechost.ProvisionRequest, meta policy.Meta) (*boundary, error) {
	b := &boundary{networkName: policy.EgressNetworkName(req.ExecutionID)}
	var mitm []exechost.EgressRule
	for _, r := range req.Egress.Rules {
		if len(r.Headers) > 0 {
			mitm = append(mitm, r)
		}
	}
	var bundle bytes.Buffer
	if len(mitm) > 0 {
		ca, err := newEgressCA(req.ExecutionID, mitm, meta.Deadline)
		if err != nil {
			return nil, fmt.Errorf("egress proxy: %w", err)
		}
		b.ca = ca
		bundle.Write(ca.certPEM)
	}
	bundle.Write(h.roots.upstream)
	b.bundle = bundle.Bytes()
	var err error
	b.networkID, err = h.createEgressNetwork(ctx, req.ExecutionID, policy.EgressLabels(req, meta, policy.RoleEgressNetwork))
	if err != nil {
		h.closeBoundary(ctx, b)
		return nil, err
	}
	return b, nil
}

// startProxy creates and starts the execution's proxy, hands it its
// configuration and waits until it listens. What it made is removed by
// closeBoundary.
func (h *Host) startProxy(ctx context.Context, req exechost.ProvisionRequest, meta policy.Meta, b *boundary) error {
	spec := h.policy.EgressProxy(h.egress.ProxyImage, h.egress.Network, policy.EgressLabels(req, meta, policy.RoleEgressProxy))
	spec.Name = policy.EgressProxyName(req.ExecutionID)
	id, err := h.create(ctx, req.ExecutionID, spec)
	if err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	b.proxyID = id
	if err := h.c.NetworkConnect(ctx, b.networkID, id, &network.EndpointSettings{}); err != nil {
		return fmt.Errorf("egress proxy: connect to %s: %w", b.networkName, err)
	}
	// Attached before it starts, so no record is missed.
	att, err := h.c.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return fmt.Errorf("egress proxy: attach: %w", err)
	}
	b.attach = &att
	b.records = newProxyRecords(req.Egress.Events)
	go b.records.read(att.Reader)
	if err := h.c.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return fmt.Errorf("egress proxy: start: %w", err)
	}
	ins, err := h.c.ContainerInspect(ctx, id)
	if err != nil {
		return fmt.Errorf("egress proxy: inspect: %w", err)
	}
	cfg, err := h.proxyConfig(ctx, req, meta, b, ins)
	if err != nil {
		return err
	}
	msg, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("egress proxy: config: %w", err)
	}
	if _, err := att.Conn.Write(msg); err != nil {
		return fmt.Errorf("egress proxy: write config: %w", err)
	}
	_ = att.CloseWrite()
	if err := b.records.waitReady(ctx, proxyReadyTimeout); err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	return nil
}

// proxyConfig is the proxy's configuration. It holds the header values
// and the CA key, so it only ever travels on the proxy's stdin.
func (h *Host) proxyConfig(ctx context.Context, req exechost.ProvisionRequest, meta policy.Meta, b *boundary, ins container.InspectResponse) (wire.Config, error) {
	var own, egressNet *network.EndpointSettings
	if ins.NetworkSettings != nil {
		own = ins.NetworkSettings.Networks[b.networkName]
		egressNet = ins.NetworkSettings.Networks[h.egress.Network]
	}
	if own == nil || own.IPAddress == "" {
		return wire.Config{}, fmt.Errorf("egress proxy: no address on %s", b.networkName)
	}
	if egressNet == nil {
		return wire.Config{}, fmt.Errorf("egress proxy: not on the egress network %s", h.egress.Network)
	}
	b.proxyIP = own.IPAddress
	pol := req.Egress
	cfg := wire.Config{
		Version:        wire.Version,
		Listen:         net.JoinHostPort(own.IPAddress, fmt.Sprint(wire.ListenPort)),
		MaxBytes:       pol.MaxBytes,
		MaxConnections: pol.MaxConnections,
		Resolve:        h.egress.Resolve,
		Deadline:       meta.Deadline,
	}
	if cfg.MaxConnections <= 0 || h.egress.MaxConnections > 0 && cfg.MaxConnections > h.egress.MaxConnections {
		cfg.MaxConnections = h.egress.MaxConnections
	}
	for _, p := range h.egress.AllowCIDRs {
		cfg.AllowCIDRs = append(cfg.AllowCIDRs, p.String())
	}
	// Refused always: the proxy's own addresses, the gateways of its
	// networks (the Docker host) and this worker's own addresses.
	deny := map[string]bool{}
	for _, ep := range []*network.EndpointSettings{own, egressNet} {
		for _, a := range []string{ep.IPAddress, ep.Gateway, ep.GlobalIPv6Address, ep.IPv6Gateway} {
			if a != "" {
				deny[a] = true
			}
		}
	}
	for _, a := range h.egressDenyAddrs(ctx) {
		deny[a] = true
	}
	for a := range deny {
		cfg.DenyAddrs = append(cfg.DenyAddrs, a)
	}
	sort.Strings(cfg.DenyAddrs)
	for _, r := range pol.Rules {
		cfg.Rules = append(cfg.Rules, wire.Rule{Host: r.Host, Port: r.Port, Headers: r.Headers})
	}
	if b.ca != nil {
		cfg.CACertPEM, cfg.CAKeyPEM = string(b.ca.certPEM), string(b.ca.keyPEM)
		cfg.UpstreamRootsPEM = string(h.roots.upstream)
	}
	return cfg, nil
}

// egressDenyAddrs are the addresses of the machine the worker runs on,
// refused to every proxy (with a local daemon, the Docker host's own; a
// containerised worker's own).
func (h *Host) egressDenyAddrs(ctx context.Context) []string {
	h.denyOnce.Do(func() {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			h.log.WarnContext(ctx, "egress: list this machine's addresses", "error", err)
			return
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && !p.Addr().IsLoopback() {
				h.denyAddrs = append(h.denyAddrs, p.Addr().String())
			}
		}
		// The gateway of the egress network is the Docker host.
		if n, err := h.c.NetworkInspect(ctx, h.egress.Network, network.InspectOptions{}); err == nil {
			for _, c := range n.IPAM.Config {
				if c.Gateway != "" {
					h.denyAddrs = append(h.denyAddrs, c.Gateway)
				}
			}
		}
	})
	return h.denyAddrs
}

// createEgressNetwork creates the execution's network, replacing a
// leftover of an earlier delivery of the same execution.
func (h *Host) createEgressNetwork(ctx context.Context, id exechost.ExecutionID, labels map[string]string) (string, error) {
	name := policy.EgressNetworkName(id)
	for attempt := 0; ; attempt++ {
		resp, err := h.c.NetworkCreate(ctx, name, policy.EgressNetwork(labels))
		if err == nil {
			return resp.ID, nil
		}
		if !errdefs.IsConflict(err) && !errdefs.IsForbidden(err) || attempt > 0 {
			return "", fmt.Errorf("create egress network: %w", err)
		}
		old, ierr := h.c.NetworkInspect(ctx, name, network.InspectOptions{})
		if errdefs.IsNotFound(ierr) {
			continue
		}
		if ierr != nil {
			return "", fmt.Errorf("create egress network: inspect %s: %w", name, ierr)
		}
		if old.Labels[policy.LabelManaged] != "true" || old.Labels[policy.LabelExecution] != string(id) {
			return "", fmt.Errorf("create egress network: name %s is taken by a network agentflow does not manage", name)
		}
		h.log.Info("replacing leftover egress network", "execution_id", id, "network_id", old.ID)
		// Its members are the leftover sandbox and proxy of this execution.
		for cid := range old.Containers {
			h.remove(ctx, cid)
		}
		h.removeNetwork(ctx, old.ID)
	}
}

// closeBoundary removes the proxy (waiting for its last records) and the
// network. Idempotent; callers remove the sandbox first, since a network
// with members cannot be removed.
func (h *Host) closeBoundary(ctx context.Context, b *boundary) {
	if b == nil {
		return
	}
	b.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if b.proxyID != "" {
			h.remove(ctx, b.proxyID)
		}
		if b.attach != nil {
			b.attach.Close()
		}
		if b.records != nil {
			// Events are never delivered after the boundary is closed: the
			// reader ends with the proxy's stream.
			select {
			case <-b.records.done:
			case <-ctx.Done():
				h.log.Warn("egress proxy records still open after removal", "container_id", b.proxyID)
			}
		}
		if b.networkID != "" {
			h.removeNetwork(ctx, b.networkID)
		}
	})
}

// removeNetwork removes a network, waiting while its last members are
// still being detached.
func (h *Host) removeNetwork(ctx context.Context, id string) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := h.c.NetworkRemove(ctx, id)
		switch {
		case err == nil || errdefs.IsNotFound(err):
			return
		case !errdefs.IsForbidden(err) && !errdefs.IsConflict(err):
			h.log.Warn("remove egress network", "network_id", id, "error", err)
			return
		}
		select { // "has active endpoints": a member is still going
		case <-ctx.Done():
			h.log.Warn("egress network still has members", "network_id", id, "error", err)
			return
		case <-tick.C:
		}
	}
}

// writeBundle puts the CAs the sandbox trusts on its /tmp (a tmpfs:
// nothing of it is checkpointed).
func (h *Host) writeBundle(ctx context.Context, containerID string, bundle []byte) error {
	var stderr bytes.Buffer
	res, err := h.run.Run(ctx, containerID, runner.Command{
		Argv: []string{"/bin/sh", "-c", `umask 022 && cat > "$0"`, policy.CABundlePath},
		User: h.policy.User(), WorkDir: policy.WorkspaceDir,
		Stdin: bytes.NewReader(bundle), Stderr: &stderr, MaxOutput: 16 << 10, Timeout: 30 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("write egress CA bundle: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("write egress CA bundle: exit %d: %s", res.ExitCode, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// proxyRecords reads a proxy's attach stream: records on stdout (one JSON
// object per line), smokescreen's log on stderr (only its tail is kept,
// for errors).
type proxyRecords struct {
	events func(exechost.EgressEvent)
	ready  chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	isReady bool
	fatal   string
	line    []byte
	stderr  []byte
}

func newProxyRecords(events func(exechost.EgressEvent)) *proxyRecords {
	return &proxyRecords{events: events, ready: make(chan struct{}), done: make(chan struct{})}
}

func (r *proxyRecords) read(stream io.Reader) {
	defer close(r.done)
	_, _ = stdcopy.StdCopy(recordWriter{r}, stderrWriter{r}, stream)
}

type recordWriter struct{ r *proxyRecords }

// Write splits stdout into lines; a line over maxRecordLine is dropped.
func (w recordWriter) Write(p []byte) (int, error) {
	r := w.r
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(r.line)+len(p) <= maxRecordLine {
				r.line = append(r.line, p...)
			} else {
				r.line = r.line[:0:0]
			}
			break
		}
		line := append(r.line, p[:i]...)
		r.line = r.line[:0]
		p = p[i+1:]
		if len(line) <= maxRecordLine {
			r.handle(line)
		}
	}
	return n, nil
}

type stderrWriter struct{ r *proxyRecords }

func (w stderrWriter) Write(p []byte) (int, error) {
	r := w.r
	r.mu.Lock()
	r.stderr = append(r.stderr, p...)
	if len(r.stderr) > proxyStderrTail {
		r.stderr = r.stderr[len(r.stderr)-proxyStderrTail:]
	}
	r.mu.Unlock()
	return len(p), nil
}

func (r *proxyRecords) handle(line []byte) {
	var rec wire.Record
	if err := json.Unmarshal(line, &rec); err != nil {
		return
	}
	switch rec.Type {
	case "ready":
		r.mu.Lock()
		if !r.isReady {
			r.isReady = true
			close(r.ready)
		}
		r.mu.Unlock()
	case "fatal":
		r.mu.Lock()
		r.fatal = rec.Reason
		r.mu.Unlock()
	case "conn":
		if r.events != nil {
			r.events(exechost.EgressEvent{
				Time: rec.Time, Host: rec.Host, Port: rec.Port, Kind: rec.Kind, Allowed: rec.Allowed,
				Reason: rec.Reason, Address: rec.Address, BytesOut: rec.BytesOut, BytesIn: rec.BytesIn,
				Duration: time.Duration(rec.DurationMS) * time.Millisecond,
			})
		}
	}
}

// waitReady waits for the proxy's "ready" record.
func (r *proxyRecords) waitReady(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-r.ready:
		return nil
	case <-r.done:
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.fatal != "" {
			return fmt.Errorf("exited: %s", r.fatal)
		}
		return fmt.Errorf("exited before it listened: %s", strings.TrimSpace(string(r.stderr)))
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return errors.New("not listening after " + timeout.String())
	}
}
