package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
	"github.com/stretchr/testify/require"
)

// seedBlocks is what the seed spec's blocks template renders to when the
// markdown (multi-line, with quotes) is pasted into the JSON string.
const seedBlocks = "[ { \"type\": \"section\", \"text\": { \"type\": \"mrkdwn\", \"text\": \"# Daily Tech News Summary - 2024-06-15\n\n- [Cloud]: EU asks \"why\" about egress fees\n- [Path]: C:\\qux\" } } ]"

func TestParseBlocks(t *testing.T) {
	tests := []struct {
		name         string
		raw          string
		wantN        int
		wantRepaired bool
		wantText     string
		wantErr      string
	}{
		{name: "array", raw: `[{"type":"divider"}]`, wantN: 1},
		{name: "valid string", raw: mustJSON(`[{"type":"section","text":{"type":"mrkdwn","text":"hi"}}]`), wantN: 1, wantText: "hi"},
		{name: "seed template repaired", raw: mustJSON(seedBlocks), wantN: 1, wantRepaired: true,
			wantText: "# Daily Tech News Summary - 2024-06-15\n\n- [Cloud]: EU asks \"why\" about egress fees\n- [Path]: C:\\qux"},
		{name: "absent", raw: ``, wantN: 0},
		{name: "empty string", raw: `"  "`, wantN: 0},
		{name: "hopeless", raw: mustJSON(`[{"type": section}]`), wantErr: "not valid JSON"},
		{name: "object not array", raw: `{"type":"divider"}`, wantErr: "JSON array"},
		{name: "missing type", raw: `[{"text":"x"}]`, wantErr: "blocks[0] has no type"},
		{name: "too long section", raw: mustJSON([]any{map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": strings.Repeat("x", 3001)}}}), wantErr: "at most 3000"},
		{name: "too many", raw: "[" + strings.Repeat(`{"type":"divider"},`, 50) + `{"type":"divider"}]`, wantErr: "at most 50"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blocks, repaired, err := parseBlocks(json.RawMessage(tt.raw))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Len(t, blocks, tt.wantN)
			require.Equal(t, tt.wantRepaired, repaired)
			if tt.wantText != "" {
				require.Equal(t, tt.wantText, blocks[0]["text"].(map[string]any)["text"])
			}
		})
	}
}

const secretURL = "https://hooks.slack.com/services/T000/B000/SuperSecretToken123"

func TestHandleNeverLeaksWebhook(t *testing.T) {
	tests := []struct {
		name     string
		in       map[string]any
		wantCode int
		wantErr  string
	}{
		{name: "seed", in: map[string]any{"webhook_url": secretURL, "channel": "C012AB3CD", "text": "📰 Daily summary generated", "blocks": seedBlocks}},
		{name: "local url", in: map[string]any{"webhook_url": "http://127.0.0.1:9/hook?token=SuperSecretToken123", "text": "x"}},
		{name: "missing webhook", in: map[string]any{"text": "x"}, wantCode: 2, wantErr: "webhook_url is required"},
		{name: "plain http", in: map[string]any{"webhook_url": "http://hooks.slack.com/SuperSecretToken123", "text": "x"}, wantCode: 2, wantErr: "https"},
		{name: "unparseable url", in: map[string]any{"webhook_url": "https://SuperSecretToken123\x7f/%zz", "text": "x"}, wantCode: 2, wantErr: "not a valid URL"},
		{name: "bad channel", in: map[string]any{"webhook_url": secretURL, "channel": "a b", "text": "x"}, wantCode: 2, wantErr: "channel"},
		{name: "nothing to send", in: map[string]any{"webhook_url": secretURL}, wantCode: 2, wantErr: "text or blocks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var out, errb bytes.Buffer
			code := toolkit.Run(t.Context(), tool, toolkit.IO{Stdin: strings.NewReader(mustJSON(tt.in)), Stdout: &out, Stderr: &errb,
				Getenv: func(k string) string { return map[string]string{"AGENTFLOW_WORKSPACE": dir}[k] }}, handle)
			require.Equal(t, tt.wantCode, code, out.String())
			require.NotContains(t, out.String()+errb.String(), "SuperSecretToken123")
			var got map[string]any
			require.NoError(t, json.Unmarshal(out.Bytes(), &got))
			if tt.wantErr != "" {
				require.Contains(t, got["error"], tt.wantErr)
				return
			}
			require.Equal(t, true, got["ok"])
			data, err := os.ReadFile(filepath.Join(dir, got["queued"].(string)))
			require.NoError(t, err)
			require.NotContains(t, string(data), "SuperSecretToken123")
			var p Payload
			require.NoError(t, json.Unmarshal(data, &p))
			require.Equal(t, tt.in["text"], p.Text)
		})
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
