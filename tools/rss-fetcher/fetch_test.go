package main

import (
	"bytes"
	"encoding/json"
	"net/http"
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
	leaf, err := ca.Leaf("techcrunch.com", "feeds.example", "big.example")
	require.NoError(t, err)
	feed := server.Handler(server.Config{Feed: true}, server.NewRecorder())
	mux := http.NewServeMux()
	mux.Handle("/feed", feed)
	mux.Handle("/feed/", feed)
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://feeds.example/feed/", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://elsewhere.example/feed/", http.StatusFound)
	})
	mux.HandleFunc("/page", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("<html><body>not a feed</body></html>"))
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("<rss>" + strings.Repeat(" ", maxFeedBytes) + "</rss>"))
	})
	srv := toolkittest.TLSServer(t, mux, leaf.TLS)
	p := toolkittest.NewProxy(t)
	for _, h := range []string{"techcrunch.com:443", "feeds.example:443", "big.example:443"} {
		p.Route(h, srv.Listener.Addr().String())
	}
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "feed.xml"), []byte(`<rss><channel><title>Local</title><item><title>one</title></item></channel></rss>`), 0o644))
	live := toolkittest.LiveEnv(t, p, ca.CertPEM, ws)
	noCA := toolkittest.LiveEnv(t, p, nil, ws)

	tests := []struct {
		name       string
		env        func(string) string
		stdin      string
		wantCode   int
		wantTitle  string
		wantItems  int
		wantSource string
		wantFinal  string
		wantErr    string
	}{
		{name: "live https through the proxy", env: live, stdin: `{"url":"https://techcrunch.com/feed/"}`,
			wantTitle: "Agentflow Upstream Fixture", wantItems: 3, wantSource: "network"},
		{name: "limit applies live", env: live, stdin: `{"url":"https://techcrunch.com/feed","limit":2}`,
			wantTitle: "Agentflow Upstream Fixture", wantItems: 2, wantSource: "network"},
		{name: "offline forced uses the fixture", env: live, stdin: `{"url":"https://techcrunch.com/feed/","mode":"offline"}`,
			wantTitle: "TechCrunch", wantItems: 10},
		{name: "offline forced, no fixture", env: live, stdin: `{"url":"https://feeds.example/feed/","mode":"offline"}`,
			wantCode: 1, wantErr: "no network in the sandbox"},
		{name: "workspace file stays local", env: live, stdin: `{"url":"file:///workspace/feed.xml"}`, wantTitle: "Local", wantItems: 1},
		{name: "redirect to an allowed host", env: live, stdin: `{"url":"https://techcrunch.com/moved"}`,
			wantTitle: "Agentflow Upstream Fixture", wantItems: 3, wantSource: "network", wantFinal: "https://feeds.example/feed/"},
		{name: "redirect to a host the proxy refuses", env: live, stdin: `{"url":"https://techcrunch.com/away"}`,
			wantCode: 1, wantErr: "fetch https://techcrunch.com/away: egress proxy refused elsewhere.example:443: 403 Forbidden: Egress proxying is denied"},
		{name: "host not on the egress list", env: live, stdin: `{"url":"https://example.org/rss"}`,
			wantCode: 1, wantErr: "egress proxy refused example.org:443: 403 Forbidden"},
		{name: "http status", env: live, stdin: `{"url":"https://techcrunch.com/missing"}`,
			wantCode: 1, wantErr: "fetch https://techcrunch.com/missing: HTTP 404 Not Found"},
		{name: "not a feed", env: live, stdin: `{"url":"https://techcrunch.com/page"}`, wantCode: 1, wantErr: "neither <rss> nor <feed>"},
		{name: "body bound", env: live, stdin: `{"url":"https://big.example/huge"}`, wantCode: 1, wantErr: "body exceeds 8 MiB"},
		{name: "CA not trusted without SSL_CERT_FILE", env: noCA, stdin: `{"url":"https://techcrunch.com/feed/"}`,
			wantCode: 1, wantErr: "certificate signed by unknown authority"},
		{name: "live forced without a proxy says why it fails", env: toolkittest.Env("AGENTFLOW_WORKSPACE", ws), stdin: `{"url":"http://127.0.0.1:1/feed","mode":"live"}`,
			wantCode: 1, wantErr: "does the step declare egress"},
		{name: "bad mode", env: live, stdin: `{"url":"https://techcrunch.com/feed/","mode":"maybe"}`, wantCode: 2, wantErr: "mode"},
		{name: "no host", env: live, stdin: `{"url":"https:///feed"}`, wantCode: 2, wantErr: "has no host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			code := toolkit.Run(t.Context(), tool, toolkit.IO{Stdin: strings.NewReader(tt.stdin), Stdout: &out, Stderr: &bytes.Buffer{}, Getenv: tt.env}, handle)
			require.Equal(t, tt.wantCode, code, out.String())
			var got struct {
				FeedTitle string `json:"feed_title"`
				Items     []Item `json:"items"`
				Source    string `json:"source"`
				FinalURL  string `json:"final_url"`
				Error     string `json:"error"`
			}
			require.NoError(t, json.Unmarshal(out.Bytes(), &got))
			if tt.wantErr != "" {
				require.Contains(t, got.Error, tt.wantErr)
				return
			}
			require.Empty(t, got.Error)
			require.Equal(t, tt.wantTitle, got.FeedTitle)
			require.Len(t, got.Items, tt.wantItems)
			require.Equal(t, tt.wantSource, got.Source)
			require.Equal(t, tt.wantFinal, got.FinalURL)
			if tt.wantSource == "network" {
				require.Equal(t, server.FeedTitles[0], got.Items[0].Title)
			}
		})
	}
}
