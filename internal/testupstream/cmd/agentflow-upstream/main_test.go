package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/smtp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/testupstream"
	"github.com/agentflow/agentflow/internal/testupstream/server"
)

func TestRun(t *testing.T) {
	ca, err := testupstream.NewCA()
	require.NoError(t, err)
	leaf, err := ca.Leaf("techcrunch.com", "smtp.corp.com")
	require.NoError(t, err)
	env := map[string]string{EnvCert: string(leaf.CertPEM), EnvKey: string(leaf.KeyPEM)}

	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-http", "127.0.0.1:0", "-https", "127.0.0.1:0", "-smtp", "127.0.0.1:0", "-control", "127.0.0.1:0"},
			func(k string) string { return env[k] }, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadBytes('\n')
	require.NoError(t, err)
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	var r ready
	require.NoError(t, json.Unmarshal(line, &r))
	require.Equal(t, "ready", r.Type)
	require.True(t, r.TLS)
	require.Equal(t, []string{"feed", "openai", "webhook", "smtp"}, r.Services)

	// HTTPS feed, with the test CA and the name on the certificate.
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "techcrunch.com"}}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Get("https://" + r.HTTPS + "/feed/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), server.FeedTitles[0])

	// Plain HTTP webhook.
	resp, err = http.Post("http://"+r.HTTP+"/services/T/B/x", "application/json", strings.NewReader(`{"text":"hi"}`))
	require.NoError(t, err)
	resp.Body.Close()

	// SMTP with STARTTLS.
	c, err := smtp.Dial(r.SMTP[0])
	require.NoError(t, err)
	require.NoError(t, c.StartTLS(&tls.Config{RootCAs: ca.Pool(), ServerName: "smtp.corp.com"}))
	require.NoError(t, c.Mail("a@x.io"))
	require.NoError(t, c.Rcpt("b@y.io"))
	w, err := c.Data()
	require.NoError(t, err)
	_, err = io.WriteString(w, "Subject: s\r\n\r\nb\r\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, c.Quit())

	resp, err = http.Get("http://" + r.Control + "/recorded")
	require.NoError(t, err)
	var rec server.Recorded
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&rec))
	resp.Body.Close()
	require.Len(t, rec.Requests, 2)
	require.True(t, rec.Requests[0].TLS)
	require.Equal(t, "techcrunch.com", rec.Requests[0].SNI)
	require.Equal(t, "webhook", rec.Requests[1].Service)
	require.Len(t, rec.Messages, 1)
	require.True(t, rec.Messages[0].TLS)

	cancel()
	require.NoError(t, <-done)
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "unknown service", args: []string{"-services", "feed,ftp"}, wantErr: `unknown service "ftp"`},
		{name: "no control", args: []string{"-control", ""}, wantErr: "-control"},
		{name: "arguments", args: []string{"x"}, wantErr: "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFlags(tt.args, io.Discard)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
	o, err := parseFlags([]string{"-services", "feed"}, io.Discard)
	require.NoError(t, err)
	require.Empty(t, o.smtp, "no smtp service, no smtp listeners")
}

func TestBadKeyPair(t *testing.T) {
	env := map[string]string{EnvCert: "x", EnvKey: "y"}
	err := run(t.Context(), []string{"-control", "127.0.0.1:0"}, func(k string) string { return env[k] }, io.Discard, io.Discard)
	require.ErrorContains(t, err, "TLS key pair")
}
