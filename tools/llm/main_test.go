package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/testupstream"
	"github.com/agentflow/agentflow/internal/testupstream/server"
	"github.com/agentflow/agentflow/tools/internal/toolkit"
	"github.com/agentflow/agentflow/tools/internal/toolkit/toolkittest"
)

func TestHandle(t *testing.T) {
	ca, err := testupstream.NewCA()
	require.NoError(t, err)
	leaf, err := ca.Leaf("api.openai.com", "strict.example")
	require.NoError(t, err)
	rec := server.NewRecorder()
	lenient := toolkittest.TLSServer(t, server.Handler(server.Config{OpenAI: true}, rec), leaf.TLS)
	strict := toolkittest.TLSServer(t, server.Handler(server.Config{OpenAI: true, RequireAuth: true}, server.NewRecorder()), leaf.TLS)
	p := toolkittest.NewProxy(t)
	p.Route("api.openai.com:443", lenient.Listener.Addr().String())
	p.Route("strict.example:443", strict.Listener.Addr().String())
	live := toolkittest.LiveEnv(t, p, ca.CertPEM, t.TempDir())

	const text = "Alpha beta gamma delta.\n\nEpsilon zeta eta theta."
	tests := []struct {
		name        string
		env         func(string) string
		in          map[string]any
		wantCode    int
		wantContent string
		wantErr     string
	}{
		{name: "completion through the proxy", env: live,
			in:          map[string]any{"base_url": "https://api.openai.com", "model": "gpt-4o-mini", "prompt": "Give 3 insights.", "text": text, "system": "terse", "max_tokens": "256", "temperature": 0},
			wantContent: "- [Alpha beta gamma]: Alpha beta gamma delta.\n- [Epsilon zeta eta]: Epsilon zeta eta theta."},
		{name: "base_url with /v1, text only", env: live, in: map[string]any{"base_url": "https://api.openai.com/v1/", "model": "m", "text": "One two three."},
			wantContent: "- [One two three]: One two three."},
		{name: "API error is the failure", env: live, in: map[string]any{"base_url": "https://strict.example", "model": "m", "prompt": "p"},
			wantCode: 1, wantErr: "chat completions: HTTP 401 Unauthorized: You didn't provide an API key."},
		{name: "host not on the egress list", env: live, in: map[string]any{"base_url": "https://api.anthropic.com", "model": "m", "prompt": "p"},
			wantCode: 1, wantErr: "egress proxy refused api.anthropic.com:443: 403 Forbidden"},
		{name: "no proxy: the error says so", env: toolkittest.Env(), in: map[string]any{"base_url": "http://127.0.0.1:1", "model": "m", "prompt": "p"},
			wantCode: 1, wantErr: "the sandbox has no egress proxy"},
		{name: "api_key refused", env: live, in: map[string]any{"base_url": "https://api.openai.com", "model": "m", "prompt": "p", "api_key": "sk-SECRET"},
			wantCode: 2, wantErr: "api_key is not an input"},
		{name: "missing base_url", env: live, in: map[string]any{"model": "m", "prompt": "p"}, wantCode: 2, wantErr: "base_url"},
		{name: "missing model", env: live, in: map[string]any{"base_url": "https://api.openai.com", "prompt": "p"}, wantCode: 2, wantErr: "model"},
		{name: "nothing to ask", env: live, in: map[string]any{"base_url": "https://api.openai.com", "model": "m"}, wantCode: 2, wantErr: "prompt or text is required"},
		{name: "temperature range", env: live, in: map[string]any{"base_url": "https://api.openai.com", "model": "m", "prompt": "p", "temperature": 3}, wantCode: 2, wantErr: "temperature"},
		{name: "max_tokens whole", env: live, in: map[string]any{"base_url": "https://api.openai.com", "model": "m", "prompt": "p", "max_tokens": 1.5}, wantCode: 2, wantErr: "max_tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdin, err := json.Marshal(tt.in)
			require.NoError(t, err)
			var out, errb bytes.Buffer
			code := toolkit.Run(t.Context(), tool, toolkit.IO{Stdin: bytes.NewReader(stdin), Stdout: &out, Stderr: &errb, Getenv: tt.env}, handle)
			require.Equal(t, tt.wantCode, code, out.String())
			require.NotContains(t, out.String()+errb.String(), "sk-SECRET")
			var got struct {
				Content      string `json:"content"`
				Model        string `json:"model"`
				FinishReason string `json:"finish_reason"`
				Usage        struct {
					PromptTokens     int `json:"prompt_tokens"`
					CompletionTokens int `json:"completion_tokens"`
					TotalTokens      int `json:"total_tokens"`
				} `json:"usage"`
				Error string `json:"error"`
			}
			require.NoError(t, json.Unmarshal(out.Bytes(), &got))
			if tt.wantErr != "" {
				require.Contains(t, got.Error, tt.wantErr)
				return
			}
			require.Empty(t, got.Error)
			require.Equal(t, tt.wantContent, got.Content)
			require.Equal(t, tt.in["model"], got.Model)
			require.Equal(t, "stop", got.FinishReason)
			require.Positive(t, got.Usage.PromptTokens)
			require.Equal(t, got.Usage.PromptTokens+got.Usage.CompletionTokens, got.Usage.TotalTokens)
		})
	}

	// What reached the API: no key from the tool, the messages as documented.
	reqs := rec.Snapshot().Service("openai")
	require.Len(t, reqs, 2)
	require.Empty(t, reqs[0].Header.Get("Authorization"))
	require.True(t, strings.HasPrefix(reqs[0].Header.Get("User-Agent"), "agentflow-llm/"))
	var sent map[string]any
	require.NoError(t, json.Unmarshal([]byte(reqs[0].Body), &sent))
	require.Equal(t, []any{
		map[string]any{"role": "system", "content": "terse"},
		map[string]any{"role": "user", "content": "Give 3 insights.\n\n" + text},
	}, sent["messages"])
	require.Equal(t, 256.0, sent["max_tokens"])
	require.Equal(t, 0.0, sent["temperature"])
}
