package toolkit_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/testupstream"
	"github.com/agentflow/agentflow/tools/internal/toolkit"
	"github.com/agentflow/agentflow/tools/internal/toolkit/toolkittest"
)

func env(getenv func(string) string) toolkit.Env { return toolkit.Env{Getenv: getenv} }

func TestLiveAndMode(t *testing.T) {
	tests := []struct {
		name    string
		env     []string
		mode    toolkit.Mode
		live    bool
		network bool
		wantErr string
	}{
		{name: "no proxy", live: false, network: false},
		{name: "https proxy", env: []string{"HTTPS_PROXY", "http://10.0.0.2:3128"}, live: true, network: true},
		{name: "all_proxy only", env: []string{"all_proxy", "http://10.0.0.2:3128"}, live: true, network: true},
		{name: "blank is unset", env: []string{"HTTP_PROXY", "  "}, live: false, network: false},
		{name: "offline forced", env: []string{"HTTPS_PROXY", "http://p:3128"}, mode: toolkit.ModeOffline, live: true, network: false},
		{name: "live forced", mode: toolkit.ModeLive, live: false, network: true},
		{name: "bad mode", mode: "sometimes", wantErr: "mode \"sometimes\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := env(toolkittest.Env(tt.env...))
			require.Equal(t, tt.live, e.Live())
			require.Equal(t, tt.live, toolkit.Live(toolkittest.Env(tt.env...)))
			got, err := e.UseNetwork(tt.mode)
			if tt.wantErr != "" {
				var ie *toolkit.InputError
				require.ErrorAs(t, err, &ie)
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.network, got)
		})
	}
}

func TestRootCAs(t *testing.T) {
	ca, err := testupstream.NewCA()
	require.NoError(t, err)
	pool, err := env(toolkittest.Env()).RootCAs()
	require.NoError(t, err)
	require.Nil(t, pool, "no SSL_CERT_FILE: the system's roots")

	pool, err = env(toolkittest.Env("SSL_CERT_FILE", toolkittest.WriteCA(t, ca.CertPEM))).RootCAs()
	require.NoError(t, err)
	require.True(t, pool.Equal(ca.Pool()), "exactly the bundle")

	_, err = env(toolkittest.Env("SSL_CERT_FILE", toolkittest.WriteCA(t, []byte("not pem")))).RootCAs()
	require.ErrorContains(t, err, "holds no PEM certificate")
	_, err = env(toolkittest.Env("SSL_CERT_FILE", "/nonexistent/ca.pem")).RootCAs()
	require.ErrorContains(t, err, "read CA bundle")
}

// upstreams starts an HTTPS and a plain HTTP server, with a proxy routing
// techcrunch.com:443 to the first and feeds.example:80 to the second.
func upstreams(t *testing.T, h http.Handler) (*toolkittest.Proxy, []byte) {
	t.Helper()
	ca, err := testupstream.NewCA()
	require.NoError(t, err)
	leaf, err := ca.Leaf("techcrunch.com", "other.example")
	require.NoError(t, err)
	tlsSrv := toolkittest.TLSServer(t, h, leaf.TLS)
	plain := httptest.NewServer(h)
	t.Cleanup(plain.Close)
	p := toolkittest.NewProxy(t)
	p.Route("techcrunch.com:443", tlsSrv.Listener.Addr().String())
	p.Route("feeds.example:80", plain.Listener.Addr().String())
	return p, ca.CertPEM
}

func TestHTTPClient(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect-away":
			http.Redirect(w, r, "https://other.example/x", http.StatusFound)
		case "/redirect-here":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/downgrade":
			http.Redirect(w, r, "http://feeds.example/ok", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			_, _ = io.WriteString(w, "hello from "+r.Host)
		}
	})
	p, caPEM := upstreams(t, h)
	tests := []struct {
		name     string
		url      string
		noCA     bool
		wantBody string
		wantRef  string // *ProxyRefusedError target
		wantErr  string
	}{
		{name: "https via CONNECT", url: "https://techcrunch.com/feed/", wantBody: "hello from techcrunch.com"},
		{name: "http forwarded", url: "http://feeds.example/rss", wantBody: "hello from feeds.example"},
		{name: "redirect on the same host", url: "https://techcrunch.com/redirect-here", wantBody: "hello from techcrunch.com"},
		{name: "redirect to another host is a new request the proxy refuses", url: "https://techcrunch.com/redirect-away", wantRef: "other.example:443"},
		{name: "refused CONNECT", url: "https://evil.example/x", wantRef: "evil.example:443"},
		{name: "refused forward", url: "http://evil.example/x", wantRef: "evil.example:80"},
		{name: "downgrade refused", url: "https://techcrunch.com/downgrade", wantErr: "refusing redirect from https to http"},
		{name: "redirect loop bounded", url: "https://techcrunch.com/loop", wantErr: "stopped after 5 redirects"},
		{name: "unknown CA", url: "https://techcrunch.com/feed/", noCA: true, wantErr: "certificate signed by unknown authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ca := caPEM
			if tt.noCA {
				ca = nil
			}
			c, err := env(toolkittest.LiveEnv(t, p, ca, t.TempDir())).HTTPClient(toolkit.HTTPOptions{})
			require.NoError(t, err)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, tt.url, nil)
			require.NoError(t, err)
			resp, err := c.Do(req)
			switch {
			case tt.wantRef != "":
				var ref *toolkit.ProxyRefusedError
				require.ErrorAs(t, err, &ref)
				require.Equal(t, tt.wantRef, ref.Target)
				require.Equal(t, http.StatusForbidden, ref.StatusCode)
				require.Equal(t, toolkittest.DenyReason(tt.wantRef), ref.Reason)
				require.ErrorContains(t, err, "egress proxy refused "+tt.wantRef+": 403 Forbidden: Egress proxying is denied")
			case tt.wantErr != "":
				require.ErrorContains(t, err, tt.wantErr)
			default:
				require.NoError(t, err)
				defer resp.Body.Close()
				body, err := toolkit.ReadBody(resp.Body, 1<<10)
				require.NoError(t, err)
				require.Equal(t, tt.wantBody, string(body))
			}
		})
	}
}

func TestReadBody(t *testing.T) {
	got, err := toolkit.ReadBody(strings.NewReader("12345"), 5)
	require.NoError(t, err)
	require.Equal(t, "12345", string(got))
	_, err = toolkit.ReadBody(strings.NewReader("123456"), 5)
	var tl *toolkit.TooLargeError
	require.ErrorAs(t, err, &tl)
	require.EqualError(t, err, "body exceeds 5 B")
	require.EqualError(t, &toolkit.TooLargeError{Limit: 8 << 20}, "body exceeds 8 MiB")
}

func TestWithoutURL(t *testing.T) {
	inner := errors.New("connection refused")
	err := toolkit.WithoutURL(&url.Error{Op: "Post", URL: "https://hooks.slack.com/services/secret", Err: inner})
	require.Equal(t, inner, err)
	require.Equal(t, inner, toolkit.WithoutURL(inner))
}

func TestDialThroughProxy(t *testing.T) {
	// An echo server standing in for SMTP: greets, then echoes one line.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.WriteString(c, "220 hello\r\n")
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = io.WriteString(c, "echo "+line)
			}()
		}
	}()
	p := toolkittest.NewProxy(t)
	p.Route("smtp.corp.com:587", ln.Addr().String())

	tests := []struct {
		name    string
		env     func(string) string
		target  string
		wantRef bool
		wantErr string
		errIs   error
	}{
		{name: "tunnel", env: toolkittest.Env("HTTPS_PROXY", p.URL), target: "smtp.corp.com:587"},
		{name: "ALL_PROXY without scheme", env: toolkittest.Env("ALL_PROXY", strings.TrimPrefix(p.URL, "http://")), target: "smtp.corp.com:587"},
		{name: "refused", env: toolkittest.Env("HTTPS_PROXY", p.URL), target: "smtp.corp.com:25", wantRef: true,
			wantErr: "egress proxy refused smtp.corp.com:25: 403 Forbidden: Egress proxying is denied to host 'smtp.corp.com:25'"},
		{name: "no proxy", env: toolkittest.Env(), target: "smtp.corp.com:587", errIs: toolkit.ErrNoProxy},
		{name: "socks unsupported", env: toolkittest.Env("ALL_PROXY", "socks5://127.0.0.1:1080"), target: "smtp.corp.com:587", wantErr: "not supported"},
		{name: "not host:port", env: toolkittest.Env("HTTPS_PROXY", p.URL), target: "smtp.corp.com", wantErr: "not host:port"},
		{name: "proxy down", env: toolkittest.Env("HTTPS_PROXY", "http://127.0.0.1:1"), target: "smtp.corp.com:587", wantErr: "connect to egress proxy for smtp.corp.com:587"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := env(tt.env).DialThroughProxy(t.Context(), tt.target)
			switch {
			case tt.errIs != nil:
				require.ErrorIs(t, err, tt.errIs)
			case tt.wantErr != "":
				require.ErrorContains(t, err, tt.wantErr)
				if tt.wantRef {
					var ref *toolkit.ProxyRefusedError
					require.ErrorAs(t, err, &ref)
					require.Equal(t, tt.target, ref.Target)
				}
			default:
				require.NoError(t, err)
				defer conn.Close()
				br := bufio.NewReader(conn)
				greet, err := br.ReadString('\n')
				require.NoError(t, err)
				require.Equal(t, "220 hello\r\n", greet)
				_, err = io.WriteString(conn, "EHLO x\r\n")
				require.NoError(t, err)
				echo, err := br.ReadString('\n')
				require.NoError(t, err)
				require.Equal(t, "echo EHLO x\r\n", echo)
			}
		})
	}
}

func TestDialThroughProxyHonoursContext(t *testing.T) {
	// A proxy that accepts and never answers: the CONNECT must end with ctx.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := env(toolkittest.Env("HTTPS_PROXY", "http://"+ln.Addr().String())).DialThroughProxy(ctx, "smtp.corp.com:587")
		errc <- err
	}()
	c := <-accepted
	t.Cleanup(func() { c.Close() })
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
}

func TestExplainNoEgress(t *testing.T) {
	dial := errors.New("dial tcp: lookup api.openai.com: no such host")
	ref := &toolkit.ProxyRefusedError{Target: "x:443", StatusCode: 403, Status: "403 Forbidden"}
	tests := []struct {
		name string
		env  func(string) string
		err  error
		hint bool
	}{
		{name: "offline network error", env: toolkittest.Env(), err: dial, hint: true},
		{name: "live network error", env: toolkittest.Env("HTTPS_PROXY", "http://p:3128"), err: dial},
		{name: "input error", env: toolkittest.Env(), err: toolkit.BadInput("x")},
		{name: "refusal", env: toolkittest.Env(), err: ref},
		{name: "nil", env: toolkittest.Env(), err: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := env(tt.env).ExplainNoEgress(tt.err)
			if !tt.hint {
				require.Equal(t, tt.err, got)
				return
			}
			require.ErrorIs(t, got, tt.err)
			require.ErrorContains(t, got, "does the step declare egress")
		})
	}
}

func TestProxyRefusedErrorWording(t *testing.T) {
	require.EqualError(t, &toolkit.ProxyRefusedError{Target: "a:443", StatusCode: 403, Status: "403 Forbidden", Reason: "no"}, "egress proxy refused a:443: 403 Forbidden: no")
	require.EqualError(t, &toolkit.ProxyRefusedError{Target: "a:443", StatusCode: 502, Status: "502 Bad gateway"}, "egress proxy could not reach a:443: 502 Bad gateway")
}
