package toolkit

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// dialer is every connection's first hop: the proxy, or the host itself
// when no proxy is set.
var dialer = &net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}

// connectTimeout bounds the CONNECT exchange when ctx has no earlier deadline.
const connectTimeout = 30 * time.Second

// proxyErrorHeader is where smokescreen (the egress proxy) states why it
// refused.
const proxyErrorHeader = "X-Smokescreen-Error"

// ErrNoProxy is DialThroughProxy's answer in a sandbox without the egress
// boundary.
var ErrNoProxy = errors.New("no egress proxy in the environment (HTTPS_PROXY, ALL_PROXY): does the step declare egress?")

// ProxyRefusedError is a proxy's refusal of a connection: a CONNECT
// answered with anything but 2xx, or a forwarded request the proxy
// answered itself.
type ProxyRefusedError struct {
	Target     string // host:port the tool asked for
	StatusCode int
	Status     string // e.g. "403 Forbidden"
	Reason     string // the proxy's explanation, bounded; may be empty
}

func (e *ProxyRefusedError) Error() string {
	verb := "refused"
	if e.StatusCode != http.StatusForbidden && e.StatusCode != http.StatusProxyAuthRequired {
		verb = "could not reach" // 502, 504: the proxy allowed it but the upstream failed
	}
	msg := fmt.Sprintf("egress proxy %s %s: %s", verb, e.Target, e.Status)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// refusal builds a *ProxyRefusedError from the proxy's answer: its
// X-Smokescreen-Error header, else the first line of a short body.
func refusal(target string, resp *http.Response) error {
	reason := resp.Header.Get(proxyErrorHeader)
	if reason == "" && resp.Body != nil && resp.ContentLength > 0 && resp.ContentLength <= 4096 {
		if b, err := ReadBody(resp.Body, 4096); err == nil {
			reason = string(b)
		}
	}
	status := resp.Status
	if status == "" {
		status = fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return &ProxyRefusedError{Target: target, StatusCode: resp.StatusCode, Status: status, Reason: Snippet(reason, 300)}
}

// proxyURL is the proxy for a non-HTTP connection: HTTPS_PROXY, else
// ALL_PROXY, else HTTP_PROXY (a CONNECT tunnel is what an https URL
// gets, so the HTTPS variables come first).
func proxyURL(getenv func(string) string) (*url.URL, error) {
	var raw, name string
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HTTP_PROXY", "http_proxy"} {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			raw, name = v, k
			break
		}
	}
	if raw == "" {
		return nil, ErrNoProxy
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%s is not a proxy URL", name)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("%s: proxy scheme %q not supported (http only)", name, u.Scheme)
	}
	return u, nil
}

// DialThroughProxy opens a TCP tunnel to hostport (for SMTP, IMAP or any
// other non-HTTP protocol) by sending CONNECT to the proxy the environment
// names. Without a proxy it fails with ErrNoProxy rather than dialling
// directly. A refusal is a *ProxyRefusedError naming hostport and the
// proxy's reason. ctx bounds the dial and the CONNECT exchange; once the
// tunnel is up, ctx no longer applies: the caller sets deadlines.
func (e Env) DialThroughProxy(ctx context.Context, hostport string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || host == "" || port == "" {
		return nil, BadInput("%q is not host:port", hostport)
	}
	pu, err := proxyURL(e.getenv())
	if err != nil {
		return nil, err
	}
	proxyAddr := pu.Host
	if pu.Port() == "" {
		proxyAddr = net.JoinHostPort(pu.Hostname(), "80")
	}
	conn, err := dialer.DialContext(ctx, "tcp", proxyAddr)
	if err != nil {
		return nil, fmt.Errorf("connect to egress proxy for %s: %w", hostport, err)
	}
	deadline := time.Now().Add(connectTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	tunnel, err := connect(conn, pu, hostport)
	if !stop() {
		err = errors.Join(err, ctx.Err())
	}
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return tunnel, nil
}

func connect(conn net.Conn, pu *url.URL, hostport string) (net.Conn, error) {
	req := &http.Request{
		Method: http.MethodConnect,
		URL:    &url.URL{Opaque: hostport},
		Host:   hostport,
		Header: http.Header{"User-Agent": {"agentflow-tool"}},
	}
	if pu.User != nil {
		pass, _ := pu.User.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(pu.User.Username()+":"+pass)))
	}
	if err := req.Write(conn); err != nil {
		return nil, fmt.Errorf("CONNECT %s via egress proxy: %w", hostport, err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, fmt.Errorf("CONNECT %s via egress proxy: read answer: %w", hostport, err)
	}
	if resp.StatusCode/100 != 2 {
		err := refusal(hostport, resp)
		resp.Body.Close()
		return nil, err
	}
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// bufferedConn is a tunnel whose first bytes (the server's greeting sent
// with the proxy's answer) are already in a bufio.Reader.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
