// Command llm calls an OpenAI-compatible chat completions API: one user
// message (prompt, a blank line, text) and an optional system message.
// It holds no API key: in a sandbox with the egress boundary the proxy
// adds the Authorization header for the API's host (a brokered header,
// the spec's secret), so neither the tool nor its input ever sees it.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"strings"

	"github.com/agentflow/agentflow/tools/internal/openai"
	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

//go:embed VERSION
var version string

var tool = toolkit.Tool{
	Name:    "llm",
	Version: version,
	Summary: "ask an OpenAI-compatible chat completions API (through the egress proxy; the API key is a brokered header)",
	Usage: `Input:  {"base_url": "https://api.openai.com", "model": "gpt-4o-mini",
         "prompt": "Summarize in 3 bullets.", "text": "...",
         "system": "You are terse.", "max_tokens": 512, "temperature": 0.2}
        Sends POST {base_url}/v1/chat/completions (base_url may end in /v1) with
        messages [{system}?, {user: prompt + "\n\n" + text}].
Output: {"content", "model", "usage": {"prompt_tokens", "completion_tokens",
         "total_tokens"}, "finish_reason"}
The API key is NOT an input. Declare the API in the step's egress with the
key as a brokered header; the egress proxy adds it on the way out:
  egress:
    - host: "api.openai.com:443"
      headers: {Authorization: "Bearer {{ .secrets.openai_api_key }}"}
A non-2xx answer fails the step with the API's error message (bounded);
redirects are not followed.`,
}

type input struct {
	openai.Config
	Prompt toolkit.Text `json:"prompt"`
	Text   toolkit.Text `json:"text"`
	// APIKey is refused: a key in the input would sit in the workflow's
	// history and the tool's memory; the proxy brokers it instead.
	APIKey json.RawMessage `json:"api_key"`
}

func main() { toolkit.Main(tool, handle) }

func handle(ctx context.Context, env toolkit.Env, in input) (any, error) {
	if len(in.APIKey) > 0 {
		return nil, toolkit.BadInput("api_key is not an input: declare it as a brokered Authorization header of the step's egress entry (see --help)")
	}
	if strings.TrimSpace(string(in.Prompt)) == "" && strings.TrimSpace(string(in.Text)) == "" {
		return nil, toolkit.BadInput("prompt or text is required")
	}
	res, err := openai.Complete(ctx, env, in.Config, string(in.Prompt), string(in.Text), "agentflow-llm/"+strings.TrimSpace(version))
	if err != nil {
		return nil, err
	}
	env.Log.Info("completion", "model", res.Model, "finish_reason", res.FinishReason,
		"prompt_tokens", res.Usage.PromptTokens, "completion_tokens", res.Usage.CompletionTokens)
	return res, nil
}
