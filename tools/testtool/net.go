package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

// probe is one network attempt of mode "net". A hostile tool tries these
// against the egress boundary; the tests read what each one got.
type probe struct {
	// Kind: dial (direct TCP, bypassing any proxy), dns (resolve a name
	// with the sandbox's resolver), connect (CONNECT through the proxy,
	// then optionally TLS and bytes), http (a request through the proxy
	// from the environment, like any HTTP client).
	Kind string `json:"kind"`
	Addr string `json:"addr"` // dial
	Name string `json:"name"` // dns
	// connect
	Target    string         `json:"target"`     // host:port in the CONNECT line
	Proxy     string         `json:"proxy"`      // default: $HTTPS_PROXY
	TLS       bool           `json:"tls"`        // handshake after the CONNECT
	SNI       string         `json:"sni"`        // server name sent (default: Target's host); "-" sends none
	Verify    bool           `json:"verify"`     // verify the server (SSL_CERT_FILE roots)
	SendBytes toolkit.Number `json:"send_bytes"` // write that many bytes after the tunnel is up
	Banner    bool           `json:"banner"`     // read what the upstream says first (a peer's greeting)
	// http
	URL       string            `json:"url"`
	Method    string            `json:"method"`
	BodyBytes toolkit.Number    `json:"body_bytes"`
	Body      string            `json:"body"` // sent as is (instead of body_bytes zeros)
	Header    map[string]string `json:"header"`
	Follow    bool              `json:"follow"` // follow redirects (each is a new request the proxy checks)
	// TimeoutMS bounds the probe (default 10 s).
	TimeoutMS toolkit.Number `json:"timeout_ms"`
}

// probeResult is what one probe saw; OK means it got through.
type probeResult struct {
	Kind      string            `json:"kind"`
	OK        bool              `json:"ok"`
	Status    int               `json:"status,omitempty"`
	Error     string            `json:"error,omitempty"`
	Body      string            `json:"body,omitempty"`
	Location  string            `json:"location,omitempty"`
	Addrs     []string          `json:"addrs,omitempty"`
	BytesSent int64             `json:"bytes_sent,omitempty"`
	Header    map[string]string `json:"header,omitempty"`
}

const probeTimeout = 10 * time.Second

// modeNet runs in.Probes in order and reports each.
func modeNet(ctx context.Context, env toolkit.Env, in input) (any, error) {
	var out []probeResult
	for _, p := range in.Probes {
		pctx, cancel := context.WithTimeout(ctx, time.Duration(p.TimeoutMS.Int(int(probeTimeout/time.Millisecond)))*time.Millisecond)
		r := runProbe(pctx, env, p)
		cancel()
		r.Kind = p.Kind
		env.Log.Info("probe", "kind", p.Kind, "ok", r.OK, "status", r.Status, "error", r.Error)
		out = append(out, r)
	}
	return map[string]any{"probes": out}, nil
}

func runProbe(ctx context.Context, env toolkit.Env, p probe) probeResult {
	switch p.Kind {
	case "dial":
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.Addr)
		if err != nil {
			return probeResult{Error: err.Error()}
		}
		c.Close()
		return probeResult{OK: true}
	case "dns":
		addrs, err := net.DefaultResolver.LookupHost(ctx, p.Name)
		if err != nil {
			return probeResult{Error: err.Error()}
		}
		return probeResult{OK: len(addrs) > 0, Addrs: addrs}
	case "connect":
		return probeConnect(ctx, env, p)
	case "http":
		return probeHTTP(ctx, p)
	}
	return probeResult{Error: fmt.Sprintf("unknown probe kind %q", p.Kind)}
}

// probeConnect opens a CONNECT tunnel by hand, so the test chooses the
// SNI and what goes through it.
func probeConnect(ctx context.Context, env toolkit.Env, p probe) probeResult {
	proxy := p.Proxy
	if proxy == "" {
		proxy = env.Getenv("HTTPS_PROXY")
	}
	u, err := url.Parse(proxy)
	if err != nil || u.Host == "" {
		return probeResult{Error: fmt.Sprintf("no proxy (HTTPS_PROXY=%q)", proxy)}
	}
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return probeResult{Error: "dial proxy: " + err.Error()}
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", p.Target, p.Target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return probeResult{Error: "read CONNECT response: " + err.Error()}
	}
	res := probeResult{Status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		// A refusal's body says why. After a 200 the "body" is the
		// tunnel itself: never read it as one.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		res.Body, res.Error = string(body), resp.Status
		return res
	}
	var conn net.Conn = &bufConn{Conn: c, r: br}
	if p.TLS {
		host, _, _ := net.SplitHostPort(p.Target)
		cfg := &tls.Config{ServerName: host, InsecureSkipVerify: !p.Verify}
		switch p.SNI {
		case "":
		case "-":
			// No SNI: crypto/tls sends none for an IP-literal ServerName.
			cfg.ServerName, cfg.InsecureSkipVerify = "127.0.0.1", true
		default:
			cfg.ServerName = p.SNI
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			res.Error = "tls: " + err.Error()
			return res
		}
		conn = tc
	}
	if p.Banner {
		buf := make([]byte, 256)
		m, err := conn.Read(buf)
		res.Body = string(buf[:m])
		if m == 0 {
			res.Error = fmt.Sprintf("no banner: %v", err)
			return res
		}
	}
	if n := p.SendBytes.Int(0); n > 0 {
		sent, err := io.Copy(conn, io.LimitReader(zeroReader{}, int64(n)))
		res.BytesSent = sent
		if err != nil {
			res.Error = "send: " + err.Error()
			return res
		}
		// The upstream may answer once it has everything; a cut tunnel ends.
		buf := make([]byte, 256)
		m, err := conn.Read(buf)
		res.Body = string(buf[:m])
		if err != nil && !errors.Is(err, io.EOF) {
			res.Error = "read: " + err.Error()
			return res
		}
	}
	res.OK = true
	return res
}

// probeHTTP is an ordinary client: net/http with the proxy from the
// environment and the roots from SSL_CERT_FILE.
func probeHTTP(ctx context.Context, p probe) probeResult {
	method := p.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if p.Body != "" {
		body = strings.NewReader(p.Body)
	} else if n := p.BodyBytes.Int(0); n > 0 {
		body = io.LimitReader(zeroReader{}, int64(n))
	}
	req, err := http.NewRequestWithContext(ctx, method, p.URL, body)
	if err != nil {
		return probeResult{Error: err.Error()}
	}
	for k, v := range p.Header {
		req.Header.Set(k, v)
	}
	cl := &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}
	if !p.Follow {
		cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	resp, err := cl.Do(req)
	if err != nil {
		return probeResult{Error: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	h := map[string]string{}
	for k := range resp.Header {
		h[k] = resp.Header.Get(k)
	}
	return probeResult{OK: resp.StatusCode < 300, Status: resp.StatusCode, Body: string(bytes.TrimSpace(b)),
		Location: resp.Header.Get("Location"), Header: h}
}

type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// bufConn reads what the CONNECT response's reader already buffered first.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }
