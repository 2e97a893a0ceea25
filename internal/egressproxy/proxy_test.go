package egressproxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/egressproxy/wire"
)

// recBuf collects the proxy's records.
type recBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (r *recBuf) Write(p []byte) (int, error) { r.mu.Lock(); defer r.mu.Unlock(); return r.b.Write(p) }

func (r *recBuf) records(t *testing.T) []wire.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []wire.Record
	sc := bufio.NewScanner(bytes.NewReader(r.b.Bytes()))
	for sc.Scan() {
		var rec wire.Record
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec), "record %q", sc.Text())
		out = append(out, rec)
	}
	return out
}

func (r *recBuf) text() string { r.mu.Lock(); defer r.mu.Unlock(); return r.b.String() }

// waitRecord waits for a conn record matching f (records of a connection
// are written when it ends, which may be just after the client returns).
func (r *recBuf) waitRecord(t *testing.T, f func(wire.Record) bool) wire.Record {
	t.Helper()
	var got wire.Record
	require.Eventually(t, func() bool {
		for _, rec := range r.records(t) {
			if rec.Type == "conn" && f(rec) {
				got = rec
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "no matching record in:\n%s", r.text())
	return got
}

type testProxy struct {
	url  *url.URL
	recs *recBuf
	ca   *x509.Certificate
}

// start runs a proxy on 127.0.0.1 with cfg (Version, MaxBytes defaulted);
// loopback upstreams are allowed only when loopback is true.
func start(t *testing.T, cfg wire.Config, loopback bool) *testProxy {
	t.Helper()
	cfg.Version = wire.Version
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 64 << 20
	}
	recs := &recBuf{}
	p, err := New(cfg, recs, io.Discard)
	require.NoError(t, err)
	p.unsafeAllowLoopback = loopback
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	u, _ := url.Parse("http://" + ln.Addr().String())
	return &testProxy{url: u, recs: recs}
}

func (tp *testProxy) client(roots *x509.CertPool) *http.Client {
	return &http.Client{
		Transport:     &http.Transport{Proxy: http.ProxyURL(tp.url), TLSClientConfig: &tls.Config{RootCAs: roots}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       20 * time.Second,
	}
}

// upstream is a recording HTTP server on 127.0.0.1.
type upstream struct {
	*httptest.Server
	hits    atomic.Int64
	mu      sync.Mutex
	headers []http.Header
	bodies  []int
}

func newUpstream(t *testing.T, tlsOn bool, h http.HandlerFunc) *upstream {
	u := &upstream{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		n, _ := io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.headers = append(u.headers, r.Header.Clone())
		u.bodies = append(u.bodies, int(n))
		u.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		fmt.Fprint(w, "hello from upstream")
	})
	if tlsOn {
		u.Server = httptest.NewUnstartedServer(handler)
		u.Server.EnableHTTP2 = false
		u.StartTLS()
	} else {
		u.Server = httptest.NewServer(handler)
	}
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) port() int { return u.Listener.Addr().(*net.TCPAddr).Port }

func (u *upstream) rootsPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: u.Certificate().Raw}))
}

// loopbackCfg maps names to 127.0.0.1 and allows loopback CIDRs.
func loopbackCfg(rules []wire.Rule, names ...string) wire.Config {
	res := map[string]string{}
	for _, n := range names {
		res[n] = "127.0.0.1"
	}
	return wire.Config{Rules: rules, Resolve: res, AllowCIDRs: []string{"127.0.0.0/8"}}
}

func TestAllowedHTTPAndRecord(t *testing.T) {
	up := newUpstream(t, false, nil)
	tp := start(t, loopbackCfg([]wire.Rule{{Host: "feed.example.com", Port: up.port()}}, "feed.example.com"), true)
	resp, err := tp.client(nil).Get(fmt.Sprintf("http://feed.example.com:%d/feed.xml", up.port()))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "hello from upstream", string(body))
	tp.client(nil).Transport.(*http.Transport).CloseIdleConnections()
	rec := tp.recs.waitRecord(t, func(r wire.Record) bool { return r.Allowed && r.Host == "feed.example.com" })
	require.Equal(t, up.port(), rec.Port)
	require.Equal(t, "http", rec.Kind)
	require.Positive(t, rec.BytesIn)
	require.Positive(t, rec.BytesOut)
	require.Equal(t, "ready", tp.recs.records(t)[0].Type)
}

func TestRefusedByList(t *testing.T) {
	up := newUpstream(t, false, nil)
	rules := []wire.Rule{{Host: "ok.example.com", Port: up.port()}, {Host: "*.wild.example.com", Port: up.port()}}
	tp := start(t, loopbackCfg(rules, "ok.example.com", "evil.example.com", "a.b.wild.example.com", "wild.example.com"), true)
	c := tp.client(nil)
	for _, tc := range []struct {
		url   string
		allow bool
	}{
		{fmt.Sprintf("http://evil.example.com:%d/", up.port()), false},    // not listed
		{fmt.Sprintf("http://ok.example.com:%d/", up.port()+1), false},    // listed host, other port
		{fmt.Sprintf("http://wild.example.com:%d/", up.port()), false},    // the bare domain of a wildcard
		{fmt.Sprintf("http://a.b.wild.example.com:%d/", up.port()), true}, // under the wildcard
		{fmt.Sprintf("https://evil.example.com:%d/", up.port()), false},   // CONNECT, not listed
		{fmt.Sprintf("https://ok.example.com:%d/", up.port()+1), false},   // CONNECT, other port
	} {
		before := up.hits.Load()
		resp, err := c.Get(tc.url)
		if tc.allow {
			require.NoError(t, err, tc.url)
			require.Equal(t, 200, resp.StatusCode, tc.url)
			resp.Body.Close()
			continue
		}
		if err == nil {
			require.Equal(t, http.StatusForbidden, resp.StatusCode, tc.url)
			resp.Body.Close()
		} else {
			require.Contains(t, err.Error(), "Forbidden", tc.url) // CONNECT refused: the client reports the status
		}
		require.Equal(t, before, up.hits.Load(), "%s reached the upstream", tc.url)
		u, _ := url.Parse(tc.url)
		tp.recs.waitRecord(t, func(r wire.Record) bool { return !r.Allowed && r.Host == u.Hostname() })
	}
}

// TestAddressesRefusedAlways: a listed name that resolves to loopback,
// link-local (metadata), multicast, unspecified or a deny address is
// refused even when the operator allows every address.
func TestAddressesRefusedAlways(t *testing.T) {
	up := newUpstream(t, false, nil)
	for _, addr := range []string{"127.0.0.1", "127.8.9.10", "169.254.169.254", "0.0.0.0", "224.0.0.1", "::1", "fe80::1", "::ffff:127.0.0.1", "10.99.0.1"} {
		t.Run(addr, func(t *testing.T) {
			cfg := wire.Config{
				Rules:      []wire.Rule{{Host: "svc.example.com", Port: up.port()}},
				Resolve:    map[string]string{"svc.example.com": addr},
				AllowCIDRs: []string{"0.0.0.0/0", "::/0"},
				DenyAddrs:  []string{"10.99.0.1"}, // e.g. the Docker gateway
			}
			tp := start(t, cfg, false)
			for _, scheme := range []string{"http", "https"} {
				resp, err := tp.client(nil).Get(fmt.Sprintf("%s://svc.example.com:%d/", scheme, up.port()))
				if scheme == "https" {
					require.ErrorContains(t, err, "Forbidden", "CONNECT refused with 403")
					continue
				}
				require.NoError(t, err)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", body)
				require.Contains(t, string(body), "refused")
			}
			require.Zero(t, up.hits.Load())
			rec := tp.recs.waitRecord(t, func(r wire.Record) bool { return !r.Allowed && r.Host == "svc.example.com" })
			require.NotEmpty(t, rec.Reason)
		})
	}
}

func TestPrivateRangeNeedsAllowCIDR(t *testing.T) {
	cfg := wire.Config{Rules: []wire.Rule{{Host: "svc.example.com", Port: 80}}, Resolve: map[string]string{"svc.example.com": "10.1.2.3"}}
	tp := start(t, cfg, false)
	resp, err := tp.client(nil).Get("http://svc.example.com/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	rec := tp.recs.waitRecord(t, func(r wire.Record) bool { return !r.Allowed })
	require.Contains(t, strings.ToLower(rec.Reason), "private")
}

// tunnel opens a CONNECT tunnel through the proxy.
func tunnel(t *testing.T, tp *testProxy, target string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", tp.url.Host)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	return c, br
}

func TestSNIMustNameTheConnectHost(t *testing.T) {
	up := newUpstream(t, true, nil)
	names := []string{"api.example.com", "other.example.com"}
	tp := start(t, loopbackCfg([]wire.Rule{{Host: "api.example.com", Port: up.port()}, {Host: "other.example.com", Port: up.port()}}, names...), true)
	roots := x509.NewCertPool()
	roots.AddCert(up.Certificate())
	for _, sni := range []string{"evil.example.com", "other.example.com", ""} {
		t.Run("sni="+sni, func(t *testing.T) {
			c, _ := tunnel(t, tp, fmt.Sprintf("api.example.com:%d", up.port()))
			cfg := &tls.Config{ServerName: sni, InsecureSkipVerify: true}
			if sni == "" {
				cfg.ServerName = "127.0.0.1" // an IP: Go sends no SNI
			}
			err := tls.Client(c, cfg).Handshake()
			require.Error(t, err)
			tp.recs.waitRecord(t, func(r wire.Record) bool {
				return !r.Allowed && r.Host == "api.example.com" && strings.Contains(r.Reason, "SNI")
			})
		})
	}
	require.Zero(t, up.hits.Load())

	// The positive control: the right SNI passes the tunnel untouched
	// (the client sees the upstream's own certificate: no termination).
	resp, err := tp.client(roots).Get(fmt.Sprintf("https://api.example.com:%d/", up.port()))
	if err != nil && strings.Contains(err.Error(), "certificate") {
		// httptest's certificate names example.com only; dial by a name
		// it carries.
		t.Fatalf("unexpected: %v", err)
	}
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, int64(1), up.hits.Load())
}

func TestNonTLSTunnelPasses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprint(c, "220 sink ESMTP\r\n")
		line, _ := bufio.NewReader(c).ReadString('\n')
		got <- line
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	tp := start(t, loopbackCfg([]wire.Rule{{Host: "smtp.example.com", Port: port}}, "smtp.example.com"), true)
	c, br := tunnel(t, tp, fmt.Sprintf("smtp.example.com:%d", port))
	banner, err := br.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "220 sink ESMTP\r\n", banner)
	fmt.Fprint(c, "EHLO sandbox\r\n")
	require.Equal(t, "EHLO sandbox\r\n", <-got)
}

// newCA makes a CA for the proxy's terminated tunnels.
func newCA(t *testing.T) (certPEM, keyPEM string, cert *x509.Certificate) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test sandbox CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	cert, _ = x509.ParseCertificate(der)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})), cert
}

const secretValue = "sk-test-0123456789abcdef-SECRET"

func TestHeaderInjection(t *testing.T) {
	up := newUpstream(t, true, nil)
	caPEM, keyPEM, ca := newCA(t)
	cfg := loopbackCfg([]wire.Rule{
		{Host: "api.example.com", Port: up.port(), Headers: map[string]string{"Authorization": "Bearer " + secretValue}},
		{Host: "plain.example.com", Port: up.port()},
	}, "api.example.com", "plain.example.com")
	cfg.CACertPEM, cfg.CAKeyPEM, cfg.UpstreamRootsPEM = caPEM, keyPEM, up.rootsPEM()
	tp := start(t, cfg, true)
	sandboxRoots := x509.NewCertPool()
	sandboxRoots.AddCert(ca)

	req, _ := http.NewRequest("POST", fmt.Sprintf("https://api.example.com:%d/v1/chat/completions", up.port()), strings.NewReader(`{"x":1}`))
	req.Header.Set("Authorization", "Bearer tool-forged")
	resp, err := tp.client(sandboxRoots).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "test sandbox CA", resp.TLS.PeerCertificates[len(resp.TLS.PeerCertificates)-1].Issuer.CommonName,
		"the tunnel of a rule with headers is terminated by the proxy")
	up.mu.Lock()
	require.Equal(t, []string{"Bearer " + secretValue}, up.headers[0].Values("Authorization"), "replaced, not appended")
	up.mu.Unlock()

	// A rule without headers is not terminated: the tool talks TLS with
	// the upstream itself (the proxy's CA does not verify it).
	_, err = tp.client(sandboxRoots).Get(fmt.Sprintf("https://plain.example.com:%d/", up.port()))
	require.Error(t, err, "the proxy's CA must not be presented for a rule without headers")
	upRoots := x509.NewCertPool()
	upRoots.AddCert(up.Certificate())
	resp, err = tp.client(upRoots).Get(fmt.Sprintf("https://plain.example.com:%d/", up.port()))
	require.NoError(t, err)
	resp.Body.Close()
	up.mu.Lock()
	require.Empty(t, up.headers[len(up.headers)-1].Values("Authorization"))
	up.mu.Unlock()

	require.NotContains(t, tp.recs.text(), secretValue, "a record carries a header value")
	tp.recs.waitRecord(t, func(r wire.Record) bool { return r.Allowed && r.Kind == "mitm" && r.Host == "api.example.com" })
}

// TestHeaderRuleRefusesPlainHTTP: a rule with headers is served over TLS
// only; a plain http:// request to its host is refused (the credential
// would travel in clear text, or the request without it).
func TestHeaderRuleRefusesPlainHTTP(t *testing.T) {
	up := newUpstream(t, false, nil)
	caPEM, keyPEM, _ := newCA(t)
	cfg := loopbackCfg([]wire.Rule{{Host: "api.example.com", Port: up.port(), Headers: map[string]string{"Authorization": "Bearer " + secretValue}}}, "api.example.com")
	cfg.CACertPEM, cfg.CAKeyPEM = caPEM, keyPEM
	tp := start(t, cfg, true)
	resp, err := tp.client(nil).Get(fmt.Sprintf("http://api.example.com:%d/", up.port()))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Zero(t, up.hits.Load())
	rec := tp.recs.waitRecord(t, func(r wire.Record) bool { return !r.Allowed && r.Host == "api.example.com" })
	require.Contains(t, rec.Reason, "TLS only")
	require.NotContains(t, tp.recs.text(), secretValue)
}

func TestMITMVerifiesUpstream(t *testing.T) {
	up := newUpstream(t, true, nil)
	caPEM, keyPEM, ca := newCA(t)
	_, _, other := newCA(t)
	cfg := loopbackCfg([]wire.Rule{{Host: "api.example.com", Port: up.port(), Headers: map[string]string{"X-Key": secretValue}}}, "api.example.com")
	cfg.CACertPEM, cfg.CAKeyPEM = caPEM, keyPEM
	cfg.UpstreamRootsPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: other.Raw})) // not the upstream's
	tp := start(t, cfg, true)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	resp, err := tp.client(roots).Get(fmt.Sprintf("https://api.example.com:%d/", up.port()))
	if err == nil {
		resp.Body.Close()
		require.NotEqual(t, 200, resp.StatusCode)
	}
	require.Zero(t, up.hits.Load(), "the secret header went to an upstream the proxy could not verify")
}

// TestMITMInnerRequestToAnotherHost: inside a terminated tunnel to the
// host with headers, a request naming another (even allowed) host is
// refused: the headers must never travel elsewhere.
func TestMITMInnerRequestToAnotherHost(t *testing.T) {
	up := newUpstream(t, true, nil)
	caPEM, keyPEM, ca := newCA(t)
	cfg := loopbackCfg([]wire.Rule{
		{Host: "api.example.com", Port: up.port(), Headers: map[string]string{"Authorization": "Bearer " + secretValue}},
		{Host: "collector.example.com", Port: up.port()},
	}, "api.example.com", "collector.example.com")
	cfg.CACertPEM, cfg.CAKeyPEM, cfg.UpstreamRootsPEM = caPEM, keyPEM, up.rootsPEM()
	tp := start(t, cfg, true)
	c, _ := tunnel(t, tp, fmt.Sprintf("api.example.com:%d", up.port()))
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	tc := tls.Client(c, &tls.Config{ServerName: "api.example.com", RootCAs: roots})
	require.NoError(t, tc.Handshake())
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: collector.example.com:%d\r\n\r\n", up.port())
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err == nil {
		resp.Body.Close()
		require.NotEqual(t, 200, resp.StatusCode)
	}
	require.Zero(t, up.hits.Load())
}

func TestRedirectIsNotFollowed(t *testing.T) {
	evil := newUpstream(t, false, nil)
	up := newUpstream(t, false, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, fmt.Sprintf("http://evil.example.com:%d/steal", evil.port()), http.StatusFound)
	})
	tp := start(t, loopbackCfg([]wire.Rule{{Host: "ok.example.com", Port: up.port()}}, "ok.example.com", "evil.example.com"), true)
	resp, err := tp.client(nil).Get(fmt.Sprintf("http://ok.example.com:%d/", up.port()))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode, "the redirect is the tool's to follow")
	require.Zero(t, evil.hits.Load())
	// Following it, the tool is refused like any other request.
	resp, err = tp.client(nil).Get(resp.Header.Get("Location"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Zero(t, evil.hits.Load())
}

func TestByteBudgetCutsUpload(t *testing.T) {
	for _, scheme := range []string{"http", "connect"} {
		t.Run(scheme, func(t *testing.T) {
			up := newUpstream(t, scheme == "connect", nil)
			cfg := loopbackCfg([]wire.Rule{{Host: "up.example.com", Port: up.port()}}, "up.example.com")
			cfg.MaxBytes = 64 << 10
			tp := start(t, cfg, true)
			roots := x509.NewCertPool()
			if scheme == "connect" {
				roots.AddCert(up.Certificate())
			}
			u := fmt.Sprintf("http://up.example.com:%d/upload", up.port())
			if scheme == "connect" {
				u = fmt.Sprintf("https://up.example.com:%d/upload", up.port())
			}
			resp, err := tp.client(roots).Post(u, "application/octet-stream", bytes.NewReader(make([]byte, 1<<20)))
			if err == nil {
				resp.Body.Close()
				require.NotEqual(t, 200, resp.StatusCode)
			}
			up.mu.Lock()
			for _, n := range up.bodies {
				require.Less(t, n, 64<<10, "the upstream received more than max_egress")
			}
			up.mu.Unlock()
			tp.recs.waitRecord(t, func(r wire.Record) bool { return !r.Allowed && strings.Contains(r.Reason, "max_egress") })
		})
	}
}

func TestConnectionBudget(t *testing.T) {
	up := newUpstream(t, false, nil)
	cfg := loopbackCfg([]wire.Rule{{Host: "up.example.com", Port: up.port()}}, "up.example.com")
	cfg.MaxConnections = 2
	tp := start(t, cfg, true)
	ok := 0
	for range 4 {
		c := tp.client(nil) // a new client: a new upstream connection each time
		resp, err := c.Get(fmt.Sprintf("http://up.example.com:%d/", up.port()))
		if err == nil {
			if resp.StatusCode == 200 {
				ok++
			}
			resp.Body.Close()
		}
		c.Transport.(*http.Transport).CloseIdleConnections()
	}
	require.Equal(t, 2, ok)
	tp.recs.waitRecord(t, func(r wire.Record) bool { return !r.Allowed && strings.Contains(r.Reason, "max_connections") })
}

func TestNewRefusesBadConfig(t *testing.T) {
	good := wire.Config{Version: wire.Version, Rules: []wire.Rule{{Host: "a.example.com", Port: 443}}, MaxBytes: 1}
	for name, mutate := range map[string]func(*wire.Config){
		"version":   func(c *wire.Config) { c.Version = 99 },
		"no rules":  func(c *wire.Config) { c.Rules = nil },
		"ip rule":   func(c *wire.Config) { c.Rules[0].Host = "10.0.0.1" },
		"bare *":    func(c *wire.Config) { c.Rules[0].Host = "*" },
		"no budget": func(c *wire.Config) { c.MaxBytes = 0 },
		"bad deny":  func(c *wire.Config) { c.DenyAddrs = []string{"x"} },
		"bad CA":    func(c *wire.Config) { c.CACertPEM, c.CAKeyPEM = "x", "y" },
		"bad roots": func(c *wire.Config) { c.UpstreamRootsPEM = "not pem" },
		"bad allow": func(c *wire.Config) { c.AllowCIDRs = []string{"10.0.0.0/33"} },
		"bad port":  func(c *wire.Config) { c.Rules[0].Port = 70000 },
	} {
		c := good
		c.Rules = append([]wire.Rule(nil), good.Rules...)
		mutate(&c)
		_, err := New(c, io.Discard, io.Discard)
		require.Error(t, err, name)
	}
	_, err := New(good, io.Discard, io.Discard)
	require.NoError(t, err)
}
