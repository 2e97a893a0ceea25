package toolkit

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// The network side of the toolkit. A sandbox with an egress boundary
// (docs/security/egress.md) reaches out only through a per-sandbox proxy
// named by the proxy variables, has no DNS of its own, and trusts the PEM
// bundle named by SSL_CERT_FILE. Every helper here reads the environment
// through Env.Getenv, never os.Getenv, so tests inject it: the standard
// library's http.ProxyFromEnvironment and system roots are read once per
// process from the real environment and cannot be.

// ProxyVars are the variables that name the egress proxy, in the order
// DialThroughProxy consults them after the HTTPS ones.
var ProxyVars = []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"}

// CertFileVar names the PEM bundle of the roots a tool trusts.
const CertFileVar = "SSL_CERT_FILE"

// Live reports whether the sandbox has the egress boundary: a proxy
// variable is set. Without one the sandbox has no network at all.
func Live(getenv func(string) string) bool {
	for _, k := range ProxyVars {
		if strings.TrimSpace(getenv(k)) != "" {
			return true
		}
	}
	return false
}

// Live reports whether this invocation has the egress boundary.
func (e Env) Live() bool { return Live(e.getenv()) }

func (e Env) getenv() func(string) string {
	if e.Getenv == nil {
		return func(string) string { return "" }
	}
	return e.Getenv
}

// Mode is a network tool's "mode" input: whether it talks to the network.
type Mode string

// Modes. Auto (also the empty string) goes to the network exactly when the
// sandbox is live; Live forces the network (directly, when no proxy is
// set: for runs outside a sandbox); Offline never touches it.
const (
	ModeAuto    Mode = "auto"
	ModeLive    Mode = "live"
	ModeOffline Mode = "offline"
)

// UseNetwork decides whether a tool with mode m talks to the network.
func (e Env) UseNetwork(m Mode) (bool, error) {
	switch m {
	case "", ModeAuto:
		return e.Live(), nil
	case ModeLive:
		return true, nil
	case ModeOffline:
		return false, nil
	default:
		return false, BadInput("mode %q must be auto, live or offline", string(m))
	}
}

// RootCAs returns the roots a tool trusts: exactly the certificates of the
// PEM bundle SSL_CERT_FILE names when it is set (the boundary's bundle
// already holds the worker's roots), else nil, which means the system's
// roots (none on the tool images). A set but unreadable or empty bundle
// is an error rather than a silent fallback.
func (e Env) RootCAs() (*x509.CertPool, error) {
	path := strings.TrimSpace(e.getenv()(CertFileVar))
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle (%s): %w", CertFileVar, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("CA bundle %s (%s) holds no PEM certificate", path, CertFileVar)
	}
	return pool, nil
}

// HTTPOptions bound an HTTP client.
type HTTPOptions struct {
	// Timeout bounds one request from dial to the end of its body
	// (default DefaultHTTPTimeout).
	Timeout time.Duration
	// MaxRedirects is how many redirects a request follows (default 5);
	// negative follows none, returning the 3xx response. Each redirect is
	// a new request through the proxy, which checks it like any other,
	// and each is logged. An https to http downgrade is refused.
	MaxRedirects int
}

// DefaultHTTPTimeout bounds a request when HTTPOptions.Timeout is zero.
const DefaultHTTPTimeout = 60 * time.Second

// HTTPClient returns a client that goes through the proxy of the
// environment (HTTPS_PROXY for https URLs, HTTP_PROXY for http URLs,
// ALL_PROXY for either when those are unset; NO_PROXY honoured) and
// trusts RootCAs. A proxy's refusal, of a CONNECT or of a forwarded
// request, comes back as a *ProxyRefusedError inside the *url.Error.
func (e Env) HTTPClient(opts HTTPOptions) (*http.Client, error) {
	roots, err := e.RootCAs()
	if err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultHTTPTimeout
	}
	if opts.MaxRedirects == 0 {
		opts.MaxRedirects = 5
	}
	proxy := proxyFunc(e.getenv())
	tr := &http.Transport{
		Proxy:                  func(r *http.Request) (*url.URL, error) { return proxy(r.URL) },
		DialContext:            dialer.DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    15 * time.Second,
		ResponseHeaderTimeout:  opts.Timeout,
		MaxResponseHeaderBytes: 1 << 20,
		IdleConnTimeout:        30 * time.Second,
		OnProxyConnectResponse: func(_ context.Context, _ *url.URL, req *http.Request, resp *http.Response) error {
			if resp.StatusCode/100 == 2 {
				return nil
			}
			return refusal(req.Host, resp)
		},
	}
	log := e.Log
	client := &http.Client{
		Transport: forwardRefusals{base: tr, proxy: proxy},
		Timeout:   opts.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if opts.MaxRedirects < 0 {
				return http.ErrUseLastResponse
			}
			if len(via) > opts.MaxRedirects {
				return fmt.Errorf("stopped after %d redirects", opts.MaxRedirects)
			}
			prev := via[len(via)-1].URL
			if prev.Scheme == "https" && req.URL.Scheme != "https" {
				return fmt.Errorf("refusing redirect from https to %s", req.URL.Scheme)
			}
			if log != nil {
				// Hosts only: a path or query may carry a token.
				log.Info("following redirect", "status", req.Response.StatusCode, "from_host", prev.Host, "to_host", req.URL.Host)
			}
			return nil
		},
	}
	return client, nil
}

// proxyFunc is http.ProxyFromEnvironment over getenv, with ALL_PROXY as
// the fallback for both schemes (the boundary sets every variable; other
// environments may set only ALL_PROXY).
func proxyFunc(getenv func(string) string) func(*url.URL) (*url.URL, error) {
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := strings.TrimSpace(getenv(k)); v != "" {
				return v
			}
		}
		return ""
	}
	all := first("ALL_PROXY", "all_proxy")
	cfg := httpproxy.Config{
		HTTPProxy:  first("HTTP_PROXY", "http_proxy"),
		HTTPSProxy: first("HTTPS_PROXY", "https_proxy"),
		NoProxy:    first("NO_PROXY", "no_proxy"),
	}
	if cfg.HTTPProxy == "" {
		cfg.HTTPProxy = all
	}
	if cfg.HTTPSProxy == "" {
		cfg.HTTPSProxy = all
	}
	return cfg.ProxyFunc()
}

// forwardRefusals turns a proxy's refusal of a forwarded (plain http)
// request into a *ProxyRefusedError. Smokescreen, which the egress proxy
// is built on, marks its own answers with X-Smokescreen-Error; an
// upstream's 403 without it stays an ordinary response.
type forwardRefusals struct {
	base  http.RoundTripper
	proxy func(*url.URL) (*url.URL, error)
}

func (f forwardRefusals) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := f.base.RoundTrip(req)
	if err != nil || req.URL.Scheme != "http" || resp.Header.Get(proxyErrorHeader) == "" {
		return resp, err
	}
	if p, _ := f.proxy(req.URL); p == nil {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, refusal(hostPort(req.URL), resp)
}

func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return u.Host + ":443"
	}
	return u.Host + ":80"
}

// ExplainNoEgress adds to a network error what is most likely wrong when
// the sandbox has no egress boundary: the step declares no egress, so
// there is no network at all. Input errors and a proxy's refusal pass
// unchanged, as does every error in a live sandbox.
func (e Env) ExplainNoEgress(err error) error {
	var ie *InputError
	var ref *ProxyRefusedError
	if err == nil || e.Live() || errors.As(err, &ie) || errors.As(err, &ref) {
		return err
	}
	return fmt.Errorf("%w (the sandbox has no egress proxy: does the step declare egress for this host:port?)", err)
}

// ReadBody reads all of r, or fails when it holds more than limit bytes.
func ReadBody(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Limit: limit}
	}
	return data, nil
}

// TooLargeError is a body over its bound.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("body exceeds %s", FormatBytes(e.Limit))
}

// FormatBytes renders n as "8 MiB", "512 KiB" or "100 B".
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d B", n)
	}
}

// WithoutURL strips the URL that net/http puts in front of every client
// error (`Post "https://…": …`), for tools whose URL is a secret (a Slack
// webhook). The rest of the chain stays intact for errors.As.
func WithoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Snippet is s cut to n bytes (on a rune boundary) and to its first line,
// for quoting a server's answer in an error without flooding it.
func Snippet(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = strings.TrimSpace(s[:i]) + " …"
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
