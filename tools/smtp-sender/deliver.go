package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/smtp"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

// smtpConfig is the "smtp" input.
type smtpConfig struct {
	Host     string         `json:"host"`
	Port     toolkit.Number `json:"port"`
	StartTLS bool           `json:"starttls"`
}

func (c smtpConfig) addr() string {
	return net.JoinHostPort(c.Host, strconv.Itoa(c.Port.Int(25)))
}

const (
	// helloName is what the tool calls itself in EHLO.
	helloName = "agentflow.local"
	// smtpTimeout bounds a whole delivery when ctx has no earlier deadline.
	smtpTimeout = 2 * time.Minute
)

// parseServer reads smtp or smtp_url; nil when neither is given.
func parseServer(in input) (*smtpConfig, error) {
	raw := strings.TrimSpace(in.SMTPURL)
	hasCfg := in.SMTP != nil && (in.SMTP.Host != "" || in.SMTP.Port.Set)
	switch {
	case hasCfg && raw != "":
		return nil, toolkit.BadInput("give smtp or smtp_url, not both")
	case raw != "":
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "smtp" || u.Hostname() == "" || u.User != nil || (u.Path != "" && u.Path != "/") {
			return nil, toolkit.BadInput("smtp_url %q must be smtp://host[:port]", raw)
		}
		c := smtpConfig{Host: u.Hostname()}
		if p := u.Port(); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil {
				return nil, toolkit.BadInput("smtp_url %q: bad port", raw)
			}
			c.Port = toolkit.Number{Value: float64(n), Set: true}
		}
		if v := u.Query().Get("starttls"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, toolkit.BadInput("smtp_url %q: starttls must be true or false", raw)
			}
			c.StartTLS = b
		}
		return &c, checkServer(c)
	case hasCfg:
		c := *in.SMTP
		c.Host = strings.TrimSpace(c.Host)
		return &c, checkServer(c)
	default:
		return nil, nil
	}
}

func checkServer(c smtpConfig) error {
	if c.Host == "" || strings.ContainsAny(c.Host, " \t\r\n/@") {
		return toolkit.BadInput("smtp host %q is not a host name", c.Host)
	}
	p := c.Port.Value
	if c.Port.Set && (p < 1 || p > 65535 || p != float64(int(p))) {
		return toolkit.BadInput("smtp port must be between 1 and 65535")
	}
	return nil
}

// deliver speaks SMTP to srv through a CONNECT tunnel of the egress proxy.
func deliver(ctx context.Context, env toolkit.Env, srv smtpConfig, msg Message) error {
	addr := srv.addr()
	conn, err := env.DialThroughProxy(ctx, addr)
	if err != nil {
		return fmt.Errorf("smtp %s: %w", addr, err)
	}
	defer conn.Close()
	deadline := time.Now().Add(smtpTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()

	fail := func(stage string, err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("smtp %s: %s: %w", addr, stage, ctx.Err())
		}
		return fmt.Errorf("smtp %s: %s: %w", addr, stage, err)
	}
	c, err := smtp.NewClient(conn, srv.Host)
	if err != nil {
		return fail("greeting", err)
	}
	defer c.Close()
	if err := c.Hello(helloName); err != nil {
		return fail("EHLO", err)
	}
	if srv.StartTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return fmt.Errorf("smtp %s: starttls is asked for but the server does not offer STARTTLS", addr)
		}
		roots, err := env.RootCAs()
		if err != nil {
			return err
		}
		if err := c.StartTLS(&tls.Config{ServerName: srv.Host, RootCAs: roots, MinVersion: tls.VersionTLS12}); err != nil {
			return fail("STARTTLS", err)
		}
	}
	if err := c.Mail(msg.From); err != nil {
		return fail("MAIL FROM <"+msg.From+">", err)
	}
	for _, to := range msg.To {
		if err := c.Rcpt(to); err != nil {
			return fail("RCPT TO <"+to+">", err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fail("DATA", err)
	}
	if _, err := w.Write(msg.Bytes); err != nil {
		return fail("DATA", err)
	}
	if err := w.Close(); err != nil {
		return fail("end of DATA", err)
	}
	if err := c.Quit(); err != nil {
		// The message is accepted once DATA ended with 250; a failed QUIT
		// does not undo that.
		env.Log.Warn("smtp QUIT failed after the message was accepted", "server", addr, "err", err.Error())
	}
	return nil
}
