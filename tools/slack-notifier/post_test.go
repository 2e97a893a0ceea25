package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
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

func TestHandleLive(t *testing.T) {
	ca, err := testupstream.NewCA()
	require.NoError(t, err)
	leaf, err := ca.Leaf("hooks.slack.com", "slack.com", "strict.slack.com")
	require.NoError(t, err)
	rec := server.NewRecorder()
	upstream := server.Handler(server.Config{Webhook: true}, rec)
	mux := http.NewServeMux()
	mux.Handle("/", upstream)
	mux.HandleFunc("/services/echo/SuperSecretToken123", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Cannot POST "+r.URL.Path, http.StatusNotFound)
	})
	mux.HandleFunc("/services/moved/SuperSecretToken123", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://hooks.slack.com/services/new/SuperSecretToken123", http.StatusFound)
	})
	mux.HandleFunc("/services/text/SuperSecretToken123", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	srv := toolkittest.TLSServer(t, mux, leaf.TLS)
	strict := toolkittest.TLSServer(t, server.Handler(server.Config{Webhook: true, RequireAuth: true}, server.NewRecorder()), leaf.TLS)
	p := toolkittest.NewProxy(t)
	p.Route("hooks.slack.com:443", srv.Listener.Addr().String())
	p.Route("slack.com:443", srv.Listener.Addr().String())
	p.Route("strict.slack.com:443", strict.Listener.Addr().String())

	tests := []struct {
		name       string
		in         map[string]any
		wantCode   int
		wantPosted string
		wantTS     string
		wantQueued bool
		wantErr    string
	}{
		{name: "incoming webhook", in: map[string]any{"webhook_url": secretURL, "channel": "C012AB3CD", "text": "📰 Daily summary generated", "blocks": seedBlocks}, wantPosted: "webhook"},
		{name: "webhook answering text ok", in: map[string]any{"webhook_url": "https://hooks.slack.com/services/text/SuperSecretToken123", "text": "x"}, wantPosted: "webhook"},
		{name: "web API, token brokered", in: map[string]any{"api_url": "https://slack.com/api/chat.postMessage", "channel": "C012AB3CD", "text": "x"}, wantPosted: "api", wantTS: "1718438400.000100"},
		{name: "web API ok=false fails", in: map[string]any{"api_url": "https://strict.slack.com/api/chat.postMessage", "channel": "C1", "text": "x"},
			wantCode: 1, wantErr: "slack api at strict.slack.com answered ok=false: not_authed"},
		{name: "non-2xx never quotes the secret path", in: map[string]any{"webhook_url": "https://hooks.slack.com/services/echo/SuperSecretToken123", "text": "x"},
			wantCode: 1, wantErr: "slack webhook at hooks.slack.com answered HTTP 404 Not Found: Cannot POST [redacted]"},
		{name: "redirect not followed", in: map[string]any{"webhook_url": "https://hooks.slack.com/services/moved/SuperSecretToken123", "text": "x"},
			wantCode: 1, wantErr: "answered HTTP 302 Found (redirects are not followed)"},
		{name: "proxy refusal", in: map[string]any{"webhook_url": "https://hooks.example.com/services/SuperSecretToken123", "text": "x"},
			wantCode: 1, wantErr: "post to slack webhook at hooks.example.com: egress proxy refused hooks.example.com:443: 403 Forbidden"},
		{name: "offline forced queues", in: map[string]any{"webhook_url": secretURL, "text": "x", "mode": "offline"}, wantQueued: true},
		{name: "api_url offline queues", in: map[string]any{"api_url": "https://slack.com/api/chat.postMessage", "text": "x", "mode": "offline"}, wantQueued: true},
		{name: "both urls", in: map[string]any{"webhook_url": secretURL, "api_url": "https://slack.com/api/chat.postMessage", "text": "x"}, wantCode: 2, wantErr: "not both"},
		{name: "plain http api_url", in: map[string]any{"api_url": "http://slack.com/api/chat.postMessage", "text": "x"}, wantCode: 2, wantErr: "api_url must be an https URL"},
		{name: "bad mode", in: map[string]any{"webhook_url": secretURL, "text": "x", "mode": "later"}, wantCode: 2, wantErr: "mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec.Reset()
			dir := t.TempDir()
			var out, errb bytes.Buffer
			code := toolkit.Run(t.Context(), tool, toolkit.IO{Stdin: strings.NewReader(mustJSON(tt.in)), Stdout: &out, Stderr: &errb,
				Getenv: toolkittest.LiveEnv(t, p, ca.CertPEM, dir)}, handle)
			require.Equal(t, tt.wantCode, code, out.String())
			require.NotContains(t, out.String()+errb.String(), "SuperSecretToken123")
			var got map[string]any
			require.NoError(t, json.Unmarshal(out.Bytes(), &got))
			if tt.wantErr != "" {
				require.Contains(t, got["error"], tt.wantErr)
				return
			}
			require.Equal(t, true, got["ok"])
			if tt.wantQueued {
				require.Empty(t, rec.Snapshot().Requests)
				data, err := os.ReadFile(filepath.Join(dir, got["queued"].(string)))
				require.NoError(t, err)
				require.NotContains(t, string(data), "SuperSecretToken123")
				return
			}
			require.Equal(t, tt.wantPosted, got["posted"])
			require.Equal(t, 200.0, got["status"])
			if tt.wantTS != "" {
				require.Equal(t, tt.wantTS, got["ts"])
			}
			reqs := rec.Snapshot().Requests
			if strings.Contains(tt.name, "text ok") {
				require.Empty(t, reqs) // the text handler is not the recording one
				return
			}
			require.Len(t, reqs, 1)
			require.Equal(t, "application/json; charset=utf-8", reqs[0].Header.Get("Content-Type"))
			require.Empty(t, reqs[0].Header.Get("Authorization"), "the tool holds no token")
			var sent Payload
			require.NoError(t, json.Unmarshal([]byte(reqs[0].Body), &sent))
			require.Equal(t, tt.in["text"], sent.Text)
			if tt.in["blocks"] != nil {
				require.Len(t, sent.Blocks, 1)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	u := mustURL(t, "https://hooks.slack.com/services/T000/B000/SuperSecretToken123?x=topsecret")
	got := redact("no_service for /services/T000/B000/SuperSecretToken123 or SuperSecretToken123 or x=topsecret", u)
	require.NotContains(t, got, "SuperSecretToken123")
	require.NotContains(t, got, "topsecret")
	require.Contains(t, got, "no_service")
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}
