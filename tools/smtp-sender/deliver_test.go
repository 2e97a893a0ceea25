package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/testupstream"
	"github.com/agentflow/agentflow/internal/testupstream/server"
	"github.com/agentflow/agentflow/tools/internal/toolkit"
	"github.com/agentflow/agentflow/tools/internal/toolkit/toolkittest"
)

// sink starts an in-process SMTP sink, with STARTTLS when cert is given.
func sink(t *testing.T, rec *server.Recorder, cert *tls.Certificate) string {
	t.Helper()
	s := &server.SMTPSink{Rec: rec, Hostname: "smtp.corp.com"}
	if cert != nil {
		s.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, s.Close())
		require.NoError(t, <-done)
	})
	return ln.Addr().String()
}

func TestHandleLive(t *testing.T) {
	ca, err := testupstream.NewCA()
	require.NoError(t, err)
	leaf, err := ca.Leaf("smtp.corp.com", "tls.corp.com")
	require.NoError(t, err)
	rec := server.NewRecorder()
	p := toolkittest.NewProxy(t)
	p.Route("smtp.corp.com:587", sink(t, rec, nil))
	p.Route("tls.corp.com:587", sink(t, rec, &leaf.TLS))
	p.Route("plain.corp.com:25", sink(t, rec, nil))

	base := map[string]any{"to": "Dana <dana@corp.com>, ops@corp.com", "subject": "Re: Your billing inquiry", "body": "Refund of 30.00 USD.\n.dot line"}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name       string
		in         map[string]any
		noProxy    bool
		noCA       bool
		wantCode   int
		wantServer string
		wantTLS    bool
		wantQueued bool
		wantErr    string
	}{
		{name: "smtp object", in: with("smtp", map[string]any{"host": "smtp.corp.com", "port": 587}), wantServer: "smtp.corp.com:587"},
		{name: "smtp_url, default port", in: with("smtp_url", "smtp://plain.corp.com"), wantServer: "plain.corp.com:25"},
		{name: "starttls asked and offered", in: with("smtp", map[string]any{"host": "tls.corp.com", "port": "587", "starttls": true}), wantServer: "tls.corp.com:587", wantTLS: true},
		{name: "starttls via url", in: with("smtp_url", "smtp://tls.corp.com:587?starttls=true"), wantServer: "tls.corp.com:587", wantTLS: true},
		{name: "starttls offered but not asked", in: with("smtp", map[string]any{"host": "tls.corp.com", "port": 587}), wantServer: "tls.corp.com:587"},
		{name: "starttls asked, not offered", in: with("smtp", map[string]any{"host": "smtp.corp.com", "port": 587, "starttls": true}),
			wantCode: 1, wantErr: "smtp smtp.corp.com:587: starttls is asked for but the server does not offer STARTTLS"},
		{name: "starttls with an untrusted certificate", noCA: true, in: with("smtp", map[string]any{"host": "tls.corp.com", "port": 587, "starttls": true}),
			wantCode: 1, wantErr: "STARTTLS: tls: failed to verify certificate"},
		{name: "port not on the egress list", in: with("smtp", map[string]any{"host": "smtp.corp.com", "port": 25}),
			wantCode: 1, wantErr: "smtp smtp.corp.com:25: egress proxy refused smtp.corp.com:25: 403 Forbidden: Egress proxying is denied to host 'smtp.corp.com:25'"},
		{name: "no egress: outbox as before", noProxy: true, in: with("smtp", map[string]any{"host": "smtp.corp.com", "port": 587}), wantQueued: true},
		{name: "offline forced", in: with("smtp", map[string]any{"host": "smtp.corp.com", "port": 587}, "mode", "offline"), wantQueued: true},
		{name: "no smtp: outbox", in: with(), wantQueued: true},
		{name: "live forced without a proxy", noProxy: true, in: with("smtp_url", "smtp://smtp.corp.com:587", "mode", "live"), wantCode: 1, wantErr: "no egress proxy in the environment"},
		{name: "live forced without smtp", in: with("mode", "live"), wantCode: 2, wantErr: "mode live needs smtp or smtp_url"},
		{name: "both forms", in: with("smtp", map[string]any{"host": "a"}, "smtp_url", "smtp://b"), wantCode: 2, wantErr: "not both"},
		{name: "bad url", in: with("smtp_url", "https://smtp.corp.com"), wantCode: 2, wantErr: "must be smtp://host[:port]"},
		{name: "bad port", in: with("smtp", map[string]any{"host": "smtp.corp.com", "port": 70000}), wantCode: 2, wantErr: "port"},
		{name: "bad host", in: with("smtp", map[string]any{"host": "a b"}), wantCode: 2, wantErr: "not a host name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec.Reset()
			dir := t.TempDir()
			getenv := toolkittest.Env("AGENTFLOW_WORKSPACE", dir)
			if !tt.noProxy {
				ca := ca.CertPEM
				if tt.noCA {
					ca = nil
				}
				getenv = toolkittest.LiveEnv(t, p, ca, dir)
			}
			var out bytes.Buffer
			code := toolkit.Run(t.Context(), tool, toolkit.IO{Stdin: strings.NewReader(mustJSON(t, tt.in)), Stdout: &out, Stderr: &bytes.Buffer{}, Getenv: getenv}, handle)
			require.Equal(t, tt.wantCode, code, out.String())
			var got map[string]any
			require.NoError(t, json.Unmarshal(out.Bytes(), &got))
			if tt.wantErr != "" {
				require.Contains(t, got["error"], tt.wantErr)
				return
			}
			require.Equal(t, []any{"dana@corp.com", "ops@corp.com"}, got["to"])
			if tt.wantQueued {
				require.Nil(t, got["delivered"])
				data, err := os.ReadFile(filepath.Join(dir, got["path"].(string)))
				require.NoError(t, err)
				require.Contains(t, string(data), "Subject: Re: Your billing inquiry")
				require.Empty(t, rec.Snapshot().Messages)
				return
			}
			require.Equal(t, true, got["delivered"])
			require.Equal(t, tt.wantServer, got["server"])
			require.Nil(t, got["path"], "delivered, not queued")
			msgs := rec.Snapshot().Messages
			require.Len(t, msgs, 1)
			m := msgs[0]
			require.Equal(t, "support@agentflow.local", m.From)
			require.Equal(t, []string{"dana@corp.com", "ops@corp.com"}, m.To)
			require.Equal(t, "agentflow.local", m.Helo)
			require.Equal(t, tt.wantTLS, m.TLS)
			require.Contains(t, m.Data, "Subject: Re: Your billing inquiry\n")
			require.Contains(t, m.Data, "Message-ID: "+got["message_id"].(string))
			require.Contains(t, m.Data, "\n.dot line", "dot-stuffing undone by the sink")
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
