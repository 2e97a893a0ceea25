package server_test

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/testupstream"
	"github.com/agentflow/agentflow/internal/testupstream/server"
)

func TestHandler(t *testing.T) {
	rec := server.NewRecorder()
	srv := httptest.NewServer(server.Handler(server.AllServices, rec))
	t.Cleanup(srv.Close)
	chat := `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"Extract 3 insights.\n\nAlpha beta gamma delta. Second sentence.\n\nEpsilon zeta eta.\n\nTheta iota kappa lambda mu."}]}`
	tests := []struct {
		name        string
		method      string
		path        string
		auth        string
		body        string
		wantStatus  int
		wantService string
		wantBody    string // substring
	}{
		{name: "feed", method: "GET", path: "/feed/", wantStatus: 200, wantService: "feed", wantBody: server.FeedTitles[1]},
		{name: "feed without slash", method: "GET", path: "/feed", wantStatus: 200, wantService: "feed", wantBody: "<rss"},
		{name: "chat", method: "POST", path: "/v1/chat/completions", auth: "Bearer sk-test", body: chat, wantStatus: 200, wantService: "openai",
			wantBody: `- [Alpha beta gamma]: Alpha beta gamma delta.\n- [Epsilon zeta eta]: Epsilon zeta eta.\n- [Theta iota kappa]: Theta iota kappa lambda mu.`},
		{name: "chat needs the key", method: "POST", path: "/v1/chat/completions", body: chat, wantStatus: 401, wantService: "openai", wantBody: "didn't provide an API key"},
		{name: "chat bad json", method: "POST", path: "/v1/chat/completions", auth: "Bearer k", body: "{", wantStatus: 400, wantService: "openai", wantBody: "could not parse"},
		{name: "chat no model", method: "POST", path: "/v1/chat/completions", auth: "Bearer k", body: `{"messages":[{"role":"user","content":"x"}]}`, wantStatus: 400, wantService: "openai", wantBody: "model"},
		{name: "slack api", method: "POST", path: "/api/chat.postMessage", auth: "Bearer xoxb-1", body: `{"channel":"C1","text":"hi"}`, wantStatus: 200, wantService: "slack-api", wantBody: `"ok":true`},
		{name: "slack api not authed", method: "POST", path: "/api/chat.postMessage", body: `{"channel":"C1"}`, wantStatus: 200, wantService: "slack-api", wantBody: `"error":"not_authed"`},
		{name: "incoming webhook", method: "POST", path: "/services/T0/B0/x", body: `{"text":"hi"}`, wantStatus: 200, wantService: "webhook", wantBody: `{"ok":true}`},
		{name: "unknown", method: "GET", path: "/nope", wantStatus: 404, wantService: "unknown"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			require.NoError(t, err)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := srv.Client().Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, tt.wantStatus, resp.StatusCode, string(body))
			if tt.wantService == "openai" && tt.wantStatus == 200 {
				var c struct {
					Model   string `json:"model"`
					Choices []struct {
						Message      struct{ Content string } `json:"message"`
						FinishReason string                   `json:"finish_reason"`
					} `json:"choices"`
					Usage struct {
						PromptTokens, CompletionTokens, TotalTokens int
					} `json:"usage"`
				}
				require.NoError(t, json.Unmarshal(body, &c))
				require.Equal(t, "gpt-4o-mini", c.Model)
				require.Equal(t, "stop", c.Choices[0].FinishReason)
				require.Equal(t, strings.ReplaceAll(tt.wantBody, `\n`, "\n"), c.Choices[0].Message.Content)
			} else {
				require.Contains(t, string(body), tt.wantBody)
			}
			// Recorded before the answer went out.
			got := rec.Snapshot().Requests
			require.Len(t, got, i+1)
			last := got[i]
			require.Equal(t, tt.wantService, last.Service)
			require.Equal(t, tt.path, last.Path)
			require.Equal(t, tt.body, last.Body)
			require.Equal(t, tt.auth, last.Header.Get("Authorization"))
			require.Equal(t, tt.wantStatus, last.Status)
		})
	}
}

func TestStubInsights(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		want []string
	}{
		{name: "prompt then text", msg: "Do it.\n\nOne two three four. Five.\n\nSix seven, eight!", want: []string{"- [One two three]: One two three four.", "- [Six seven eight]: Six seven, eight!"}},
		{name: "one paragraph is text", msg: "Only text here", want: []string{"- [Only text here]: Only text here"}},
		{name: "long sentence cut", msg: "p\n\n" + strings.Repeat("w ", 30), want: []string{"- [w w w]: " + strings.TrimSpace(strings.Repeat("w ", 20))}},
		{name: "at most three", msg: "p\n\na.\n\nb.\n\nc.\n\nd.", want: []string{"- [a]: a.", "- [b]: b.", "- [c]: c."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, server.StubInsights(tt.msg, server.Insights))
		})
	}
}

func TestControl(t *testing.T) {
	rec := server.NewRecorder()
	up := httptest.NewServer(server.Handler(server.AllServices, rec))
	t.Cleanup(up.Close)
	ctl := httptest.NewServer(server.Control(rec))
	t.Cleanup(ctl.Close)
	resp, err := http.Post(up.URL+"/services/x", "application/json", strings.NewReader(`{"text":"x"}`))
	require.NoError(t, err)
	resp.Body.Close()

	resp, err = http.Get(ctl.URL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)

	var got server.Recorded
	resp, err = http.Get(ctl.URL + "/recorded")
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	resp.Body.Close()
	require.Len(t, got.Service("webhook"), 1)
	require.NotNil(t, got.Messages)

	resp, err = http.Post(ctl.URL+"/reset", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Empty(t, rec.Snapshot().Requests)
}

func TestSMTPSink(t *testing.T) {
	ca, err := testupstream.NewCA()
	require.NoError(t, err)
	leaf, err := ca.Leaf("smtp.corp.com")
	require.NoError(t, err)
	rec := server.NewRecorder()
	sink := &server.SMTPSink{Rec: rec, TLS: &tls.Config{Certificates: []tls.Certificate{leaf.TLS}}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- sink.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, sink.Close())
		require.NoError(t, <-done)
	})

	send := func(t *testing.T, starttls bool, to ...string) {
		c, err := smtp.Dial(ln.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.Hello("client.test"))
		ok, _ := c.Extension("STARTTLS")
		require.True(t, ok)
		if starttls {
			require.NoError(t, c.StartTLS(&tls.Config{ServerName: "smtp.corp.com", RootCAs: ca.Pool()}))
		}
		require.NoError(t, c.Noop())
		require.NoError(t, c.Mail("a@x.io"))
		for _, r := range to {
			require.NoError(t, c.Rcpt(r))
		}
		w, err := c.Data()
		require.NoError(t, err)
		_, err = io.WriteString(w, "Subject: hi\r\n\r\n.leading dot\r\nbody\r\n")
		require.NoError(t, err)
		require.NoError(t, w.Close())
		require.NoError(t, c.Reset())
		require.NoError(t, c.Quit())
	}
	send(t, false, "b@y.io", "c@z.io")
	send(t, true, "d@y.io")

	msgs := rec.Snapshot().Messages
	require.Len(t, msgs, 2)
	require.Equal(t, []string{"b@y.io", "c@z.io"}, msgs[0].To)
	require.Equal(t, "a@x.io", msgs[0].From)
	require.Equal(t, "client.test", msgs[0].Helo)
	require.False(t, msgs[0].TLS)
	require.Equal(t, "Subject: hi\n\n.leading dot\nbody\n", msgs[0].Data)
	require.True(t, msgs[1].TLS)

	// Protocol errors answer, they do not hang up.
	c, err := smtp.Dial(ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.ErrorContains(t, c.Rcpt("x@y.io"), "503")
}
