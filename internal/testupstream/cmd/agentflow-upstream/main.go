// Command agentflow-upstream is the test upstream of live specs: a feed
// server, an OpenAI-compatible stub, a webhook receiver and an SMTP sink
// in one process, each recording what it receives, plus a control
// endpoint that returns the records (package
// internal/testupstream/server). It is test infrastructure, never a
// /bin/tool: the image agentflow/test-upstream:latest
// (tools/build-images.sh) runs it, and package testupstream starts that
// image for tests.
//
// The TLS certificate and key (PEM) come from AGENTFLOW_UPSTREAM_TLS_CERT
// and AGENTFLOW_UPSTREAM_TLS_KEY; without them HTTPS and STARTTLS are off.
// When every listener is bound it prints one JSON line on stdout,
// {"type":"ready",...}; its log goes to stderr.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentflow/agentflow/internal/testupstream/server"
)

// Environment variables holding the TLS certificate chain and key, PEM.
const (
	EnvCert = server.EnvCert
	EnvKey  = server.EnvKey
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "agentflow-upstream:", err)
		os.Exit(1)
	}
}

type options struct {
	http, https, control string
	smtp                 []string
	services             map[string]bool
	requireAuth          bool
	hostname             string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("agentflow-upstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var smtp, services string
	fs.StringVar(&o.http, "http", ":80", "plain HTTP listen address of the services (empty: off)")
	fs.StringVar(&o.https, "https", ":443", "HTTPS listen address of the services (empty: off; needs the TLS variables)")
	fs.StringVar(&smtp, "smtp", ":25,:587", "SMTP sink listen addresses, comma-separated (empty: off)")
	fs.StringVar(&o.control, "control", ":8081", "control endpoint listen address (GET /recorded, GET /healthz, POST /reset)")
	fs.StringVar(&services, "services", "feed,openai,webhook,smtp", "services to run, comma-separated")
	fs.BoolVar(&o.requireAuth, "require-auth", true, "OpenAI stub and Slack Web API refuse requests without Authorization: Bearer")
	fs.StringVar(&o.hostname, "hostname", "upstream.test", "name in the SMTP greeting")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.control == "" {
		return o, errors.New("-control must not be empty")
	}
	o.services = map[string]bool{}
	for _, s := range splitList(services) {
		if !slices.Contains([]string{"feed", "openai", "webhook", "smtp"}, s) {
			return o, fmt.Errorf("unknown service %q (feed, openai, webhook, smtp)", s)
		}
		o.services[s] = true
	}
	if o.services["smtp"] {
		o.smtp = splitList(smtp)
	}
	return o, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

type ready struct {
	Type     string   `json:"type"`
	HTTP     string   `json:"http,omitempty"`
	HTTPS    string   `json:"https,omitempty"`
	SMTP     []string `json:"smtp,omitempty"`
	Control  string   `json:"control"`
	TLS      bool     `json:"tls"`
	Services []string `json:"services"`
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	var tlsCfg *tls.Config
	if cert, key := getenv(EnvCert), getenv(EnvKey); cert != "" || key != "" {
		pair, err := tls.X509KeyPair([]byte(cert), []byte(key))
		if err != nil {
			return fmt.Errorf("TLS key pair from %s/%s: %w", EnvCert, EnvKey, err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	if tlsCfg == nil && o.https != "" {
		log.Warn("no TLS certificate: HTTPS and STARTTLS are off", "env", EnvCert)
		o.https = ""
	}
	rec := server.NewRecorder()
	cfg := server.Config{Feed: o.services["feed"], OpenAI: o.services["openai"], Webhook: o.services["webhook"], RequireAuth: o.requireAuth}
	handler := server.Handler(cfg, rec)

	// Bind everything before announcing readiness.
	type httpLn struct {
		ln  net.Listener
		srv *http.Server
	}
	var hs []httpLn
	var smtpLns []net.Listener
	closeAll := func() {
		for _, h := range hs {
			_ = h.ln.Close()
		}
		for _, ln := range smtpLns {
			_ = ln.Close()
		}
	}
	listen := func(addr string) (net.Listener, error) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
		return ln, nil
	}
	newSrv := func(h http.Handler) *http.Server {
		return &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	}
	r := ready{Type: "ready", TLS: tlsCfg != nil}
	for _, s := range []string{"feed", "openai", "webhook", "smtp"} {
		if o.services[s] {
			r.Services = append(r.Services, s)
		}
	}
	ln, err := listen(o.control)
	if err != nil {
		return err
	}
	hs = append(hs, httpLn{ln, newSrv(server.Control(rec))})
	r.Control = ln.Addr().String()
	if o.http != "" {
		ln, err := listen(o.http)
		if err != nil {
			return err
		}
		hs = append(hs, httpLn{ln, newSrv(handler)})
		r.HTTP = ln.Addr().String()
	}
	if o.https != "" {
		ln, err := listen(o.https)
		if err != nil {
			return err
		}
		srv := newSrv(handler)
		srv.TLSConfig = tlsCfg.Clone()
		hs = append(hs, httpLn{tls.NewListener(ln, srv.TLSConfig), srv})
		r.HTTPS = ln.Addr().String()
	}
	for _, addr := range o.smtp {
		ln, err := listen(addr)
		if err != nil {
			return err
		}
		smtpLns = append(smtpLns, ln)
		r.SMTP = append(r.SMTP, ln.Addr().String())
	}
	sink := &server.SMTPSink{Rec: rec, Hostname: o.hostname, TLS: tlsCfg}

	g, gctx := errgroup.WithContext(ctx)
	for _, h := range hs {
		g.Go(func() error {
			if err := h.srv.Serve(h.ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	for _, ln := range smtpLns {
		g.Go(func() error { return sink.Serve(ln) })
	}
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), 5*time.Second)
		defer cancel()
		for _, h := range hs {
			_ = h.srv.Shutdown(sctx)
		}
		return sink.Close()
	})
	if err := json.NewEncoder(stdout).Encode(r); err != nil {
		return fmt.Errorf("announce readiness: %w", err)
	}
	log.Info("serving", "services", r.Services, "http", r.HTTP, "https", r.HTTPS, "smtp", r.SMTP, "control", r.Control)
	err = g.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}
