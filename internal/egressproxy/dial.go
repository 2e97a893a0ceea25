package egressproxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stripe/goproxy"
	"github.com/stripe/smokescreen/pkg/smokescreen"

	"github.com/agentflow/agentflow/internal/egressproxy/wire"
)

// alwaysDenied are address classes no allow CIDR can open: smokescreen
// lets AllowRanges override its own non-global checks, so this list is
// enforced again at dial time, on the address actually dialled.
var alwaysDenied = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network", unspecified
	netip.MustParsePrefix("127.0.0.0/8"),    // loopback
	netip.MustParsePrefix("169.254.0.0/16"), // link-local: cloud metadata
	netip.MustParsePrefix("224.0.0.0/4"),    // multicast
	netip.MustParsePrefix("255.255.255.255/32"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
}

// errBudget is a connection cut or refused by the sandbox's budgets.
var errBudget = errors.New("egress budget exhausted")

// dialer is smokescreen's ProxyDialTimeout: it checks the resolved
// address once more, counts connections and wraps each in an accounted
// conn that checks SNI and records the connection when it ends.
type dialer struct {
	p *Proxy
}

func (d *dialer) dial(ctx context.Context, network, addr string, timeout time.Duration) (net.Conn, error) {
	p := d.p
	host, port, kind := "", 0, "http"
	var sctx *smokescreen.SmokescreenContext
	if pctx, ok := ctx.Value(goproxy.ProxyContextKey).(*goproxy.ProxyCtx); ok {
		if sctx, ok = pctx.UserData.(*smokescreen.SmokescreenContext); ok {
			host, port = splitHostPort(sctx.RequestedHost, 0)
			kind = sctx.ProxyType
			if sctx.Decision != nil && sctx.Decision.MitmConfig != nil {
				kind = "mitm"
			}
			if port == 0 {
				port = map[bool]int{true: 443, false: 80}[kind != "http"]
			}
		}
	}
	refuse := func(reason string) (net.Conn, error) {
		p.rec.write(wire.Record{Type: "conn", Host: host, Port: port, Kind: kind, Allowed: false, Reason: reason, Address: addr})
		if sctx != nil {
			p.refusals.Store(sctx, reason) // answered 403 (Proxy.reject)
		}
		return nil, fmt.Errorf("egress: %s: %s", addr, reason)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return refuse("dial address is not an IP:port")
	}
	if reason := p.deniedAddr(ap.Addr().Unmap()); reason != "" {
		return refuse(reason)
	}
	if n := p.conns.Add(1); p.cfg.MaxConnections > 0 && n > int64(p.cfg.MaxConnections) {
		return refuse(fmt.Sprintf("max_connections: the step's %d connections are used", p.cfg.MaxConnections))
	}
	if p.bytes.Load() >= p.cfg.MaxBytes {
		return refuse(fmt.Sprintf("max_egress: the step's %d bytes are used", p.cfg.MaxBytes))
	}
	c, err := (&net.Dialer{Timeout: timeout}).DialContext(ctx, network, addr)
	if err != nil {
		return refuse("connect failed: " + shortErr(err))
	}
	ac := &acctConn{Conn: c, p: p, host: host, port: port, kind: kind, addr: addr, start: time.Now()}
	// A tunnel the proxy does not terminate carries the tool's own TLS:
	// its ClientHello must name the CONNECT host.
	ac.checkSNI = kind == "connect"
	return ac, nil
}

// deniedAddr says why a is refused, or "".
func (p *Proxy) deniedAddr(a netip.Addr) string {
	if !p.unsafeAllowLoopback || !a.IsLoopback() {
		for _, pre := range alwaysDenied {
			if pre.Contains(a) {
				return "address " + a.String() + " is loopback, link-local, multicast or unspecified: refused always"
			}
		}
	}
	for _, d := range p.denyAddrs {
		if d == a {
			return "address " + a.String() + " belongs to the Docker host or the proxy: refused always"
		}
	}
	if a.Is4In6() || (a.Is6() && !a.Is4In6() && isEmbedding(a)) {
		return "address " + a.String() + " embeds an IPv4 address: refused"
	}
	return ""
}

func isEmbedding(a netip.Addr) bool {
	for _, pre := range []string{"64:ff9b::/96", "2002::/16", "2001::/32"} {
		if netip.MustParsePrefix(pre).Contains(a) {
			return true
		}
	}
	return false
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

// maxHello bounds what is held back to read a ClientHello.
const maxHello = 16 << 10

// acctConn is one upstream connection: every byte both ways counts
// against the sandbox's budget, and its end is one record.
type acctConn struct {
	net.Conn
	p          *Proxy
	host, kind string
	port       int
	addr       string
	start      time.Time
	in, out    atomic.Int64

	checkSNI bool
	hello    []byte // held back until the SNI is known
	decided  bool

	once   sync.Once
	reason atomic.Pointer[string]
}

func (c *acctConn) charge(n int) error {
	if c.p.bytes.Add(int64(n)) > c.p.cfg.MaxBytes {
		c.cut(fmt.Sprintf("max_egress: more than the step's %d bytes", c.p.cfg.MaxBytes))
		return errBudget
	}
	return nil
}

func (c *acctConn) cut(reason string) {
	c.reason.CompareAndSwap(nil, &reason)
	_ = c.Conn.Close()
}

func (c *acctConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.in.Add(int64(n))
		if cerr := c.charge(n); cerr != nil {
			return 0, cerr
		}
	}
	return n, err
}

func (c *acctConn) Write(b []byte) (int, error) {
	if c.checkSNI && !c.decided {
		return c.writeHello(b)
	}
	return c.write(b)
}

func (c *acctConn) write(b []byte) (int, error) {
	if c.p.bytes.Load()+int64(len(b)) > c.p.cfg.MaxBytes {
		c.cut(fmt.Sprintf("max_egress: more than the step's %d bytes", c.p.cfg.MaxBytes))
		return 0, errBudget
	}
	n, err := c.Conn.Write(b)
	c.out.Add(int64(n))
	c.p.bytes.Add(int64(n))
	return n, err
}

// writeHello holds the tool's first bytes until they are a whole TLS
// record (then the SNI decides) or clearly not TLS (then they pass).
func (c *acctConn) writeHello(b []byte) (int, error) {
	c.hello = append(c.hello, b...)
	if c.hello[0] != 0x16 { // not a TLS handshake: SMTP, plain HTTP, …
		return c.release(len(b))
	}
	if len(c.hello) < 5 {
		return len(b), nil
	}
	need := 5 + (int(c.hello[3])<<8 | int(c.hello[4]))
	if need > maxHello {
		c.cut("tls: ClientHello record larger than 16 KiB")
		return 0, errBudget
	}
	if len(c.hello) < need {
		return len(b), nil
	}
	sni, err := clientHelloSNI(c.hello[:need])
	switch {
	case err != nil:
		c.cut("tls: unreadable ClientHello: " + err.Error())
		return 0, err
	case sni == "":
		c.cut("tls: ClientHello without SNI in a tunnel to " + c.host)
		return 0, errBudget
	case !strings.EqualFold(strings.TrimSuffix(sni, "."), c.host):
		c.cut(fmt.Sprintf("tls: SNI %q differs from the CONNECT host %q", sni, c.host))
		return 0, errBudget
	}
	return c.release(len(b))
}

func (c *acctConn) release(n int) (int, error) {
	c.decided = true
	held := c.hello
	c.hello = nil
	if _, err := c.write(held); err != nil {
		return 0, err
	}
	return n, nil
}

func (c *acctConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		rec := wire.Record{Type: "conn", Host: c.host, Port: c.port, Kind: c.kind, Allowed: true, Address: c.addr,
			BytesOut: c.out.Load(), BytesIn: c.in.Load(), DurationMS: time.Since(c.start).Milliseconds(), Reason: "allowed"}
		if r := c.reason.Load(); r != nil {
			rec.Allowed, rec.Reason = false, *r
		}
		c.p.rec.write(rec)
	})
	return err
}

// clientHelloSNI reads the server name of one TLS record holding a
// ClientHello, with crypto/tls's own parser: a server handshake over the
// record that stops as soon as the hello is parsed.
func clientHelloSNI(record []byte) (string, error) {
	var sni string
	stop := errors.New("stop")
	srv := tls.Server(helloConn{r: bytes.NewReader(record)}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni = h.ServerName
			return nil, stop
		},
	})
	err := srv.Handshake()
	if errors.Is(err, stop) || sni != "" {
		return sni, nil
	}
	if err == nil {
		err = errors.New("no ClientHello")
	}
	return "", err
}

// helloConn replays a record and swallows what the server would answer.
type helloConn struct {
	net.Conn
	r io.Reader
}

func (c helloConn) Read(b []byte) (int, error)       { return c.r.Read(b) }
func (c helloConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c helloConn) Close() error                     { return nil }
func (c helloConn) SetDeadline(time.Time) error      { return nil }
func (c helloConn) SetReadDeadline(time.Time) error  { return nil }
func (c helloConn) SetWriteDeadline(time.Time) error { return nil }
func (c helloConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c helloConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
