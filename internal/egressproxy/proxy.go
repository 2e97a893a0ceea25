// Package egressproxy is the egress proxy of one NetworkEgress sandbox
// (cmd/agentflow-egress-proxy), built on Stripe's smokescreen: CONNECT and
// HTTP forward proxying, resolving names itself and dialling the checked
// address, private-range denial and TLS termination with added headers are
// smokescreen's. This package adds only what is agentflow's: the
// sandbox's host:port rules (decider.go), addresses refused whatever the
// operator allows, the SNI check, the byte and connection budgets
// (dial.go), and one record per connection on stdout (records.go).
package egressproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stripe/goproxy"
	"github.com/stripe/smokescreen/pkg/smokescreen"
	"github.com/stripe/smokescreen/pkg/smokescreen/conntrack"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/egressproxy/wire"
)

// role is the one smokescreen role: a proxy serves one sandbox.
const role = "sandbox"

// Proxy is one configured proxy.
type Proxy struct {
	cfg       wire.Config
	rec       *recorder
	sc        *smokescreen.Config
	handler   http.Handler
	denyAddrs []netip.Addr
	resolve   map[string]netip.Addr

	conns, bytes atomic.Int64
	// refusals are the reasons of requests refused at dial time (an
	// address refused always, a budget), so their answer is a 403 like
	// every other refusal, not smokescreen's 500 for an unknown error.
	refusals sync.Map // *smokescreen.SmokescreenContext → string

	// unsafeAllowLoopback lets in-process tests use upstreams on
	// 127.0.0.1. Never set outside tests: wire.Config cannot set it.
	unsafeAllowLoopback bool
}

// New validates cfg and builds the proxy; records go to out.
func New(cfg wire.Config, out io.Writer, log io.Writer) (*Proxy, error) {
	if cfg.Version != wire.Version {
		return nil, fmt.Errorf("egress proxy: config version %d, want %d", cfg.Version, wire.Version)
	}
	if len(cfg.Rules) == 0 {
		return nil, errors.New("egress proxy: no rules")
	}
	for _, r := range cfg.Rules {
		if err := exechost.CheckEgressHost(r.Host); err != nil {
			return nil, fmt.Errorf("egress proxy: rule: %w", err)
		}
		if err := exechost.CheckEgressPort(r.Port); err != nil {
			return nil, fmt.Errorf("egress proxy: rule %s: %w", r.Host, err)
		}
	}
	if cfg.MaxBytes <= 0 {
		return nil, errors.New("egress proxy: max_bytes must be positive")
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = exechost.DefaultEgressConns
	}
	p := &Proxy{cfg: cfg, rec: newRecorder(out), resolve: map[string]netip.Addr{}}
	for _, a := range cfg.DenyAddrs {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return nil, fmt.Errorf("egress proxy: deny address %q: %w", a, err)
		}
		p.denyAddrs = append(p.denyAddrs, ip.Unmap())
	}
	for name, a := range cfg.Resolve {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return nil, fmt.Errorf("egress proxy: resolve %s: %w", name, err)
		}
		p.resolve[name] = ip
	}

	sc := smokescreen.NewConfig()
	lg := logrus.New()
	if log == nil {
		log = io.Discard
	}
	lg.SetOutput(log)
	lg.SetFormatter(&logrus.JSONFormatter{})
	lg.AddHook(denyHook{rec: p.rec})
	sc.Log = lg
	sc.Port = wire.ListenPort
	sc.EgressACL = newDecider(cfg.Rules)
	sc.RoleFromRequest = func(*http.Request) (string, error) { return role, nil }
	sc.Resolver = resolver{p: p}
	sc.ConnectTimeout = 10 * time.Second
	sc.IdleTimeout = 2 * time.Minute
	if err := sc.SetAllowRanges(cfg.AllowCIDRs); err != nil {
		return nil, fmt.Errorf("egress proxy: allow CIDRs: %w", err)
	}
	sc.ProxyDialTimeout = (&dialer{p: p}).dial
	// smokescreen answers a refused forward request with 407; a refusal
	// is 403, for forward requests as for CONNECT.
	sc.RejectResponseHandlerWithCtx = p.reject
	sc.ConnTracker = conntrack.NewTracker(sc.IdleTimeout, sc.MetricsClient, lg, sc.ShuttingDown, nil)
	sc.ShuttingDown.Store(false)
	if err := sc.InitializeSelfConnectionDetection(); err != nil {
		lg.WithError(err).Warn("self-connection detection")
	}
	if cfg.CACertPEM != "" {
		ca, err := tls.X509KeyPair([]byte(cfg.CACertPEM), []byte(cfg.CAKeyPEM))
		if err != nil {
			return nil, fmt.Errorf("egress proxy: CA: %w", err)
		}
		sc.MitmTLSConfig = goproxy.TLSConfigFromCA(&ca)
	}
	proxy := smokescreen.BuildProxy(sc)
	// Upstreams of terminated tunnels are verified against the worker's
	// roots only (the proxy image has none of its own).
	roots := x509.NewCertPool()
	if cfg.UpstreamRootsPEM != "" && !roots.AppendCertsFromPEM([]byte(cfg.UpstreamRootsPEM)) {
		return nil, errors.New("egress proxy: upstream roots: no certificate in PEM")
	}
	proxy.Tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	proxy.Tr.Proxy = nil
	// One upstream connection per forwarded request: each is accounted and
	// recorded when it ends, and none outlives the request that made it.
	proxy.Tr.DisableKeepAlives = true
	p.sc, p.handler = sc, proxy
	return p, nil
}

// reject rewrites smokescreen's refusals: 407 for a denied request and
// 500 for one refused at dial time both become 403 with the reason.
func (p *Proxy) reject(sctx *smokescreen.SmokescreenContext, r *http.Response) {
	if reason, ok := p.refusals.LoadAndDelete(sctx); ok {
		msg := fmt.Sprintf("Egress proxying is denied: %s\n", reason)
		r.Body, r.ContentLength = io.NopCloser(strings.NewReader(msg)), int64(len(msg))
		r.Header.Set("Content-Length", strconv.Itoa(len(msg)))
		r.StatusCode, r.Status = http.StatusForbidden, "403 Forbidden"
		return
	}
	if r.StatusCode == http.StatusProxyAuthRequired {
		r.StatusCode, r.Status = http.StatusForbidden, "403 Forbidden"
	}
}

// Serve answers on ln until ctx ends or the deadline passes.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	if !p.cfg.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, p.cfg.Deadline)
		defer cancel()
	}
	srv := &http.Server{
		Handler:           p.handler,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          nil,
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	p.rec.write(wire.Record{Type: "ready", Allowed: true, Address: ln.Addr().String()})
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Run listens on cfg.Listen and serves; the proxy binary's whole life.
func Run(ctx context.Context, cfg wire.Config, out, log io.Writer) error {
	p, err := New(cfg, out, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("egress proxy: listen: %w", err)
	}
	return p.Serve(ctx, ln)
}

// resolver answers overrides first (test-only names), else DNS. What it
// answers is still checked by smokescreen and by dial.
type resolver struct{ p *Proxy }

func (r resolver) LookupIP(ctx context.Context, network, host string) ([]net.IP, error) {
	if a, ok := r.p.resolve[host]; ok {
		return []net.IP{a.AsSlice()}, nil
	}
	return net.DefaultResolver.LookupIP(ctx, network, host)
}

func (r resolver) LookupPort(ctx context.Context, network, service string) (int, error) {
	return net.DefaultResolver.LookupPort(ctx, network, service)
}
