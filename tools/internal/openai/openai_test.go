package openai_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/testupstream/server"
	"github.com/agentflow/agentflow/tools/internal/openai"
	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

func TestEndpoint(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  string
	}{
		{in: "https://api.openai.com", want: "https://api.openai.com/v1/chat/completions"},
		{in: "https://api.openai.com/", want: "https://api.openai.com/v1/chat/completions"},
		{in: "https://api.openai.com/v1", want: "https://api.openai.com/v1/chat/completions"},
		{in: "http://llm.internal:8000/openai/v1/", want: "http://llm.internal:8000/openai/v1/chat/completions"},
		{in: "https://x.io/v1?key=abc", want: "https://x.io/v1/chat/completions"},
		{in: "ftp://x.io", wantErr: "http(s) URL"},
		{in: "", wantErr: "http(s) URL"},
		{in: "https://user:sk-secret@x.io", wantErr: "must not carry credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := openai.Endpoint(tt.in)
			if tt.wantErr != "" {
				var ie *toolkit.InputError
				require.ErrorAs(t, err, &ie)
				require.ErrorContains(t, err, tt.wantErr)
				require.NotContains(t, err.Error(), "sk-secret")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestMessages(t *testing.T) {
	require.Equal(t, []openai.Message{{Role: "system", Content: "S"}, {Role: "user", Content: "P\n\nT"}}, openai.Messages("S", "P\n", "T"))
	require.Equal(t, []openai.Message{{Role: "user", Content: "T"}}, openai.Messages(" ", "", "T"))
	require.Equal(t, []openai.Message{{Role: "user", Content: "P"}}, openai.Messages("", "P", " "))
}

func TestChat(t *testing.T) {
	stub := server.Handler(server.Config{OpenAI: true}, server.NewRecorder())
	fixed := func(status int, body string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		})
	}
	var seen *http.Request
	var seenBody []byte
	recording := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = r.Clone(r.Context())
			seenBody, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(seenBody)))
			h.ServeHTTP(w, r)
		})
	}
	temp, maxTok := 0.2, 64
	tests := []struct {
		name      string
		h         http.Handler
		want      openai.Result
		wantErr   string
		wantAPI   int
		checkSent bool
	}{
		{name: "stub", h: recording(stub), checkSent: true, want: openai.Result{
			Content: "- [Alpha beta gamma]: Alpha beta gamma.", Model: "m1", FinishReason: "stop",
			Usage: openai.Usage{PromptTokens: 5, CompletionTokens: 7, TotalTokens: 12}}},
		{name: "api error object", h: fixed(401, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`),
			wantAPI: 401, wantErr: "chat completions: HTTP 401 Unauthorized: Incorrect API key provided"},
		{name: "api error string", h: fixed(429, `{"error":"rate limited"}`), wantAPI: 429, wantErr: "HTTP 429 Too Many Requests: rate limited"},
		{name: "not json", h: fixed(502, "upstream connect error\nmore"), wantAPI: 502, wantErr: "HTTP 502 Bad Gateway: upstream connect error …"},
		{name: "long message bounded", h: fixed(400, `{"error":{"message":"`+strings.Repeat("x", 5000)+`"}}`), wantAPI: 400, wantErr: strings.Repeat("x", 500) + "…"},
		{name: "no choices", h: fixed(200, `{"model":"m","choices":[]}`), wantErr: "answer has no choices"},
		{name: "not a completion", h: fixed(200, `[1]`), wantErr: "not a chat completion"},
		{name: "refusal", h: fixed(200, `{"choices":[{"message":{"content":null,"refusal":"no"}}]}`), wantErr: "the model refused: no"},
		{name: "too large", h: fixed(200, strings.Repeat(" ", openai.MaxResponse+1)), wantErr: "body exceeds 4 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.h)
			t.Cleanup(srv.Close)
			c := &openai.Client{HTTP: srv.Client(), BaseURL: srv.URL, UserAgent: "test/1"}
			got, err := c.Chat(t.Context(), openai.Request{Model: "m1", Messages: openai.Messages("sys", "Summarize", "Alpha beta gamma."), Temperature: &temp, MaxTokens: &maxTok})
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				var ae *openai.APIError
				if tt.wantAPI != 0 {
					require.ErrorAs(t, err, &ae)
					require.Equal(t, tt.wantAPI, ae.StatusCode)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			if tt.checkSent {
				require.Equal(t, "/v1/chat/completions", seen.URL.Path)
				require.Empty(t, seen.Header.Get("Authorization"), "the key is brokered, never sent by the tool")
				require.Equal(t, "test/1", seen.Header.Get("User-Agent"))
				var sent map[string]any
				require.NoError(t, json.Unmarshal(seenBody, &sent))
				require.Equal(t, map[string]any{"model": "m1", "temperature": 0.2, "max_tokens": 64.0, "messages": []any{
					map[string]any{"role": "system", "content": "sys"},
					map[string]any{"role": "user", "content": "Summarize\n\nAlpha beta gamma."},
				}}, sent)
			}
		})
	}
}
