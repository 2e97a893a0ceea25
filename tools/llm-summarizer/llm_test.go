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

func TestHandleLLM(t *testing.T) {
	ca, err := testupstream.NewCA()
	require.NoError(t, err)
	leaf, err := ca.Leaf("api.openai.com")
	require.NoError(t, err)
	rec := server.NewRecorder()
	srv := toolkittest.TLSServer(t, server.Handler(server.Config{OpenAI: true}, rec), leaf.TLS)
	p := toolkittest.NewProxy(t)
	p.Route("api.openai.com:443", srv.Listener.Addr().String())
	live := toolkittest.LiveEnv(t, p, ca.CertPEM, t.TempDir())
	offline := toolkittest.Env()

	texts := "Storage matters for grids today.\n\nPasskeys stop phishing attacks well.\n\nRobots now come on subscription plans.\n\nChips go open with RISC-V designs."
	llm := map[string]any{"base_url": "https://api.openai.com", "model": "gpt-4o-mini"}
	tests := []struct {
		name        string
		env         func(string) string
		in          map[string]any
		wantCode    int
		wantModel   string
		wantSummary string
		wantSent    string // the user message the API got
		wantErr     string
	}{
		{name: "seed prompt through the API", env: live, in: map[string]any{"texts": texts, "prompt": seedPrompt, "llm": llm},
			wantModel: "gpt-4o-mini",
			// The stub drops the first paragraph (the prompt) and takes one bullet per paragraph.
			wantSummary: "- [Storage matters for]: Storage matters for grids today.\n- [Passkeys stop phishing]: Passkeys stop phishing attacks well.\n- [Robots now come]: Robots now come on subscription plans.",
			wantSent:    strings.TrimRight(seedPrompt, "\n") + "\n\n" + texts},
		{name: "default prompt from n and max_words, titled items", env: live,
			in:          map[string]any{"texts": []any{map[string]any{"title": "A", "content": "Alpha beta gamma."}}, "n": 1, "max_words": 9, "llm": llm},
			wantModel:   "gpt-4o-mini",
			wantSummary: "- [A Alpha beta]: A Alpha beta gamma.",
			wantSent:    "Extract exactly 1 key insights from the following texts.\nFormat each insight as: - [Insight title]: [Concise explanation, max 9 words].\nDo not add introduction or conclusion.\n\nA\nAlpha beta gamma."},
		{name: "llm without the egress boundary stays extractive", env: offline, in: map[string]any{"texts": texts, "prompt": seedPrompt, "llm": llm},
			wantModel: "extractive-tf"},
		{name: "empty llm object is absent", env: live, in: map[string]any{"texts": texts, "prompt": seedPrompt, "llm": map[string]any{}},
			wantModel: "extractive-tf"},
		{name: "bad llm config is bad input even offline", env: offline, in: map[string]any{"texts": texts, "llm": map[string]any{"base_url": "nope", "model": "m"}},
			wantCode: 2, wantErr: "base_url"},
		{name: "refused by the proxy", env: live, in: map[string]any{"texts": texts, "llm": map[string]any{"base_url": "https://api.mistral.ai", "model": "m"}},
			wantCode: 1, wantErr: "egress proxy refused api.mistral.ai:443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec.Reset()
			var out bytes.Buffer
			code := toolkit.Run(t.Context(), tool, toolkit.IO{Stdin: strings.NewReader(mustJSON(tt.in)), Stdout: &out, Stderr: &bytes.Buffer{}, Getenv: tt.env}, handle)
			require.Equal(t, tt.wantCode, code, out.String())
			var got struct {
				Summary  string    `json:"summary"`
				Insights []Insight `json:"insights"`
				Model    string    `json:"model"`
				Usage    *struct {
					TotalTokens int `json:"total_tokens"`
				}
				FinishReason string `json:"finish_reason"`
				Error        string `json:"error"`
			}
			require.NoError(t, json.Unmarshal(out.Bytes(), &got))
			if tt.wantErr != "" {
				require.Contains(t, got.Error, tt.wantErr)
				return
			}
			require.Empty(t, got.Error)
			require.Equal(t, tt.wantModel, got.Model)
			if tt.wantModel == "extractive-tf" {
				require.Nil(t, got.Usage)
				require.Empty(t, rec.Snapshot().Requests, "no request when extractive")
				require.Len(t, got.Insights, 3)
				return
			}
			require.Equal(t, tt.wantSummary, got.Summary)
			require.Equal(t, "stop", got.FinishReason)
			require.NotNil(t, got.Usage)
			require.Positive(t, got.Usage.TotalTokens)
			require.Len(t, got.Insights, len(strings.Split(tt.wantSummary, "\n")))
			require.Equal(t, -1, got.Insights[0].Source)
			reqs := rec.Snapshot().Service("openai")
			require.Len(t, reqs, 1)
			var sent struct {
				Messages []struct{ Role, Content string }
			}
			require.NoError(t, json.Unmarshal([]byte(reqs[0].Body), &sent))
			require.Equal(t, "user", sent.Messages[len(sent.Messages)-1].Role)
			require.Equal(t, tt.wantSent, sent.Messages[len(sent.Messages)-1].Content)
		})
	}
}

func TestParseBullets(t *testing.T) {
	got := parseBullets("Intro\n- [A]: one\n* [B] : two \n1. [C]: three\n- no brackets")
	require.Equal(t, []Insight{{Title: "A", Explanation: "one", Source: -1}, {Title: "B", Explanation: "two", Source: -1}, {Title: "C", Explanation: "three", Source: -1}}, got)
	require.Empty(t, parseBullets("nothing"))
}
