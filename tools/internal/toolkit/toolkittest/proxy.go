// Package toolkittest holds test helpers for tools that use the network:
// an in-process stand-in for the egress proxy and the environment a live
// sandbox gives a tool. Only tests import it.
package toolkittest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Proxy is an in-process forward proxy standing in for the egress proxy:
// CONNECT tunnels and absolute-URI (plain http) forwarding, for the
// host:port targets it has a route for only. Like the egress proxy it
// resolves names itself (a route maps host:port to the address of an
// httptest server, so tools use real names such as techcrunch.com:443),
// refuses anything else with 403 and an X-Smokescreen-Error reason, and
// never follows redirects. It does not terminate TLS.
type Proxy struct {
	// URL is what HTTPS_PROXY and friends are set to.
	URL string

	srv *httptest.Server

	mu      sync.Mutex
	routes  map[string]string
	records []Record
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// Record is one request the proxy decided on.
type Record struct {
	Kind    string // connect | http
	Target  string // host:port
	Allowed bool
}

// NewProxy starts a proxy with no routes; it stops, closing every tunnel
// and waiting for its copiers, when t ends.
func NewProxy(t testing.TB) *Proxy {
	t.Helper()
	p := &Proxy{routes: map[string]string{}, conns: map[net.Conn]struct{}{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	t.Cleanup(p.close)
	return p
}

// Route allows hostport and sends it to addr (an httptest server's
// Listener.Addr(), say).
func (p *Proxy) Route(hostport, addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.routes[hostport] = addr
}

// Records returns the decisions so far, in order.
func (p *Proxy) Records() []Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Record(nil), p.records...)
}

// DenyReason is the explanation the proxy gives for a refusal, in the
// egress proxy's words.
func DenyReason(target string) string {
	return fmt.Sprintf("Egress proxying is denied to host '%s': not on the step's egress list.", target)
}

func (p *Proxy) decide(kind, target string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	addr, ok := p.routes[target]
	p.records = append(p.records, Record{Kind: kind, Target: target, Allowed: ok})
	return addr, ok
}

func deny(w http.ResponseWriter, target string) {
	msg := DenyReason(target)
	w.Header().Set("X-Smokescreen-Error", msg)
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusForbidden)
	_, _ = io.WriteString(w, msg+"\n")
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		p.tunnel(w, r)
	case r.URL.IsAbs():
		p.forward(w, r)
	default:
		http.Error(w, "not a proxy request", http.StatusBadRequest)
	}
}

func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request) {
	addr, ok := p.decide("connect", r.Host)
	if !ok {
		deny(w, r.Host)
		return
	}
	up, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		http.Error(w, "dial: "+err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "no hijack", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !p.trackTunnel(up, down) {
		return
	}
	_, _ = io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n")
	// What the client sent after CONNECT may already sit in buf.
	var src io.Reader = down
	if n := buf.Reader.Buffered(); n > 0 {
		pending, _ := buf.Reader.Peek(n)
		src = io.MultiReader(bytes.NewReader(bytes.Clone(pending)), down)
	}
	go p.pipe(up, src, up, down)
	go p.pipe(down, up, up, down)
}

// trackTunnel registers both ends (closed by close) and two copiers.
func (p *Proxy) trackTunnel(up, down net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		up.Close()
		down.Close()
		return false
	}
	p.conns[up], p.conns[down] = struct{}{}, struct{}{}
	p.wg.Add(2)
	return true
}

// pipe copies src to dst; the first copier to finish closes both ends, so
// the other one ends too.
func (p *Proxy) pipe(dst io.Writer, src io.Reader, a, b net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	a.Close()
	b.Close()
}

func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	target := r.URL.Host
	if r.URL.Port() == "" {
		target = net.JoinHostPort(r.URL.Hostname(), "80")
	}
	addr, ok := p.decide("http", target)
	if !ok {
		deny(w, target)
		return
	}
	out := r.Clone(context.WithoutCancel(r.Context()))
	out.RequestURI = ""
	out.URL.Host = addr
	out.Host = r.URL.Host
	out.Header.Del("Proxy-Connection")
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(out)
	if err != nil {
		http.Error(w, "forward: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (p *Proxy) close() {
	p.srv.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// Env is a Getenv over kv pairs ("NAME", "value", ...).
func Env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// LiveEnv is the environment of a live sandbox behind p: every proxy
// variable set to p.URL, SSL_CERT_FILE naming a file holding caPEM (none
// when caPEM is empty), and the workspace, plus extra pairs.
func LiveEnv(t testing.TB, p *Proxy, caPEM []byte, workspace string, extra ...string) func(string) string {
	t.Helper()
	kv := []string{"AGENTFLOW_WORKSPACE", workspace}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"} {
		kv = append(kv, k, p.URL)
	}
	if len(caPEM) > 0 {
		kv = append(kv, "SSL_CERT_FILE", WriteCA(t, caPEM))
	}
	return Env(append(kv, extra...)...)
}

// WriteCA writes a PEM bundle to a temporary file and returns its path.
func WriteCA(t testing.TB, pem []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem, 0o644); err != nil {
		t.Fatalf("write CA bundle: %v", err)
	}
	return path
}

// TLSServer starts an HTTPS test server presenting cert (a leaf for the
// names the tool will use, e.g. from testupstream.CA.Leaf), closed when t
// ends.
func TLSServer(t testing.TB, h http.Handler, cert tls.Certificate) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	// Handshakes a test fails on purpose (an untrusted CA) are not news.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}
