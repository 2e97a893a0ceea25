package worker

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker"
)

// DefaultEgressProxyImage is the egress proxy's image (tools/build-images.sh).
const DefaultEgressProxyImage = "agentflow/egress-proxy:latest"

// EgressConfig configures the egress boundary of steps that declare
// egress (docs/security/egress.md). The zero value serves egress with the
// default proxy image on the bridge network, private ranges refused.
type EgressConfig struct {
	// Disabled: steps with egress fail with a policy error (worker
	// --egress=false).
	Disabled bool
	// ProxyImage is the proxy's image, a tag or an ID (worker
	// --egress-proxy-image; default DefaultEgressProxyImage). Resolved to
	// its ID at start; a missing image serves no egress (logged).
	ProxyImage string
	// Network is the Docker network proxies reach upstreams on
	// (--egress-network; default the bridge).
	Network string
	// AllowCIDRs are private ranges upstreams may be in
	// (--egress-allow-cidr; ParseEgressAllowCIDR).
	AllowCIDRs []netip.Prefix
	// CAFile holds CAs (PEM) the proxy and the sandboxes trust for
	// upstreams besides the worker's system roots (--egress-ca-file).
	CAFile string
	// Resolve overrides DNS in the proxies, name → address (test-only:
	// --egress-resolve; ParseEgressResolve). Addresses are checked like
	// any resolved one.
	Resolve map[string]string
	// MaxConnections bounds connections per sandbox
	// (--egress-max-connections; 0: exechost.DefaultEgressConns).
	MaxConnections int
}

// alwaysDeniedRanges can never be opened by --egress-allow-cidr: the proxy
// refuses them whatever the operator allows, so allowing them is an error.
var alwaysDeniedRanges = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
}

// ParseEgressAllowCIDR parses one --egress-allow-cidr: a prefix that is
// not the whole address space and does not touch loopback, link-local
// (cloud metadata), multicast or unspecified addresses.
func ParseEgressAllowCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("--egress-allow-cidr %q: %v", s, err)
	}
	p = p.Masked()
	if p.Bits() == 0 {
		return netip.Prefix{}, fmt.Errorf("--egress-allow-cidr %q: the whole address space; allow the ranges of the services you mean", s)
	}
	for _, d := range alwaysDeniedRanges {
		if p.Overlaps(d) {
			return netip.Prefix{}, fmt.Errorf("--egress-allow-cidr %q overlaps %s (loopback, link-local, multicast or unspecified), which egress refuses always", s, d)
		}
	}
	return p, nil
}

// ParseEgressResolve parses one --egress-resolve name=address.
func ParseEgressResolve(s string) (name, addr string, err error) {
	name, addr, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", fmt.Errorf("--egress-resolve %q: want NAME=ADDRESS", s)
	}
	if err := exechost.CheckEgressHost(name); err != nil || strings.HasPrefix(name, "*.") {
		return "", "", fmt.Errorf("--egress-resolve %q: %q is not a host name", s, name)
	}
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return "", "", fmt.Errorf("--egress-resolve %q: %v", s, err)
	}
	return name, a.String(), nil
}

// egressDisabledReason is why a step with egress fails on a worker
// started with --egress=false.
const egressDisabledReason = "this worker serves no egress (started with --egress=false): run steps that declare egress on a worker with egress on"

// egressDocker is what egressOptions asks the daemon.
type egressDocker interface {
	client.ImageAPIClient
	docker.InfoClient
}

// egressOptions resolves the configuration into the Docker host's
// options: the proxy image to its ID, the CA file to PEM. Without the
// proxy image the worker serves no egress: steps with egress then fail
// with a policy error whose reason (Unavailable) says why, every other
// step runs.
func egressOptions(ctx context.Context, dc egressDocker, cfg EgressConfig, runtime string, log *slog.Logger) (docker.EgressOptions, error) {
	if cfg.Disabled {
		log.Info("egress disabled (--egress=false): steps that declare egress fail")
		return docker.EgressOptions{Unavailable: egressDisabledReason}, nil
	}
	opts := docker.EgressOptions{Network: cfg.Network, AllowCIDRs: cfg.AllowCIDRs, Resolve: cfg.Resolve, MaxConnections: cfg.MaxConnections}
	if opts.Network == "" {
		opts.Network = docker.DefaultEgressNetwork
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return docker.EgressOptions{}, fmt.Errorf("--egress-ca-file: %w", err)
		}
		opts.ExtraRootsPEM = pem
	}
	ref := cfg.ProxyImage
	if ref == "" {
		ref = DefaultEgressProxyImage
	}
	img, err := dc.ImageInspect(ctx, ref)
	switch {
	case errdefs.IsNotFound(err):
		log.Warn("egress proxy image not found: steps that declare egress will fail (build it with make images)", "image", ref)
		opts.Unavailable = fmt.Sprintf("this worker serves no egress: its egress proxy image %s is not on the worker's Docker daemon (build it with make images, or start the worker with --egress-proxy-image)", ref)
		return opts, nil
	case err != nil:
		return docker.EgressOptions{}, fmt.Errorf("egress proxy image %s: %w", ref, err)
	}
	opts.ProxyImage = img.ID
	if opts.Unavailable, err = docker.EgressUnavailable(ctx, dc, runtime); err != nil {
		return docker.EgressOptions{}, err
	}
	if opts.Unavailable != "" {
		log.Warn("egress unavailable: steps that declare egress will fail", "reason", opts.Unavailable)
		return opts, nil
	}
	log.Info("egress enabled", "proxy_image", ref, "proxy_image_id", img.ID, "network", opts.Network,
		"allow_cidrs", cfg.AllowCIDRs, "extra_ca", cfg.CAFile != "", "resolve_overrides", len(cfg.Resolve))
	return opts, nil
}

// CheckEgressCAFile checks an --egress-ca-file: readable, with at least
// one PEM certificate.
func CheckEgressCAFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--egress-ca-file: %w", err)
	}
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			return fmt.Errorf("--egress-ca-file %s: no PEM certificate in it", path)
		}
		if blk.Type == "CERTIFICATE" {
			if _, err := x509.ParseCertificate(blk.Bytes); err == nil {
				return nil
			}
		}
	}
}

// egressLookup resolves egress hosts for the dry-run preflight
// (activities.HostLookup) the way this worker's egress proxies resolve
// them: the --egress-resolve overrides first, then DNS. The proxy runs in
// a container on the worker's Docker daemon and uses the daemon's DNS,
// which on one machine is the worker's; a worker that serves no egress
// fails every lookup with the reason steps with egress would fail with.
// Which addresses the proxy then refuses is decided at connect time, by
// the proxy alone (internal/egressproxy).
type egressLookup struct {
	resolve     map[string]string
	unavailable string
	// dns defaults to net.DefaultResolver.LookupNetIP.
	dns func(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// newEgressLookup is the lookup of a worker whose egress boundary has
// opts (the Docker backend's resolved options).
func newEgressLookup(opts docker.EgressOptions) *egressLookup {
	return &egressLookup{resolve: opts.Resolve, unavailable: opts.Unavailable}
}

// LookupHost implements activities.HostLookup.
func (l *egressLookup) LookupHost(ctx context.Context, host string) ([]netip.Addr, error) {
	if l.unavailable != "" {
		return nil, errors.New(l.unavailable)
	}
	if a, ok := l.resolve[host]; ok {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return nil, fmt.Errorf("--egress-resolve %s=%s: %w", host, a, err)
		}
		return []netip.Addr{addr}, nil
	}
	dns := l.dns
	if dns == nil {
		dns = net.DefaultResolver.LookupNetIP
	}
	addrs, err := dns(ctx, "ip", host)
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return nil, fmt.Errorf("%s does not resolve on this worker (no such host)", host)
		}
		return nil, fmt.Errorf("resolve %s on this worker: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s resolves to no address on this worker", host)
	}
	return addrs, nil
}

// configEgressLookup is the lookup of a worker with an injected backend:
// the configuration's overrides, then DNS.
func configEgressLookup(cfg EgressConfig) *egressLookup {
	l := &egressLookup{resolve: cfg.Resolve}
	if cfg.Disabled {
		l.unavailable = egressDisabledReason
	}
	return l
}
