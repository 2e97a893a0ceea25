// Command llm-summarizer is the daily-news demo's summarizer. By default it
// is a stand-in for an LLM: an extractive summarizer (sentences scored by
// word frequency) that honours the parts of the prompt a pipeline depends
// on — how many insights ("exactly 3") and how long each may be ("max 20
// words") — and the "- [Title]: text" bullet format. Deterministic,
// CPU-only, no model weights. Given "llm": {base_url, model} in a sandbox
// with the egress boundary, it asks that OpenAI-compatible API instead
// (tools/internal/openai, shared with tools/llm).
package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentflow/agentflow/tools/internal/openai"
	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

//go:embed VERSION
var version string

var tool = toolkit.Tool{
	Name:    "llm-summarizer",
	Version: version,
	Summary: "extract N key insights from texts (extractive stand-in for an LLM, or an OpenAI-compatible API when live)",
	Usage: `Input:  {"texts": "doc one...\n\ndoc two..." | ["doc", ...] | [{"title","content"}, ...],
         "prompt": "... exactly 3 key insights ... max 20 words",
         "n": 3, "max_words": 20,            (n / max_words override the prompt)
         "llm": {"base_url": "https://api.openai.com", "model": "gpt-4o-mini",
                 "system": "...", "max_tokens": 512, "temperature": 0.2}}   (optional)
Output: {"summary": "- [Title]: explanation\n...", "insights": [{"title","explanation","source"}],
         "model": "extractive-tf", "documents": N, "sentences": N}
With "llm" and the egress boundary (HTTPS_PROXY set; the step declares
egress for the API with its key as a brokered Authorization header, see
the llm tool's --help) the summary is the model's answer to prompt + the
texts; n / max_words then only shape the default prompt used when prompt
is empty. Output adds "usage" and "finish_reason"; "model" is the API's
model; insights are the answer's "- [Title]: text" lines (source -1).
Without the egress boundary "llm" is ignored (logged) and the summary is
extractive, exactly as without it.`,
}

type input struct {
	Texts    json.RawMessage `json:"texts"`
	Prompt   toolkit.Text    `json:"prompt"`
	N        toolkit.Number  `json:"n"`
	MaxWords toolkit.Number  `json:"max_words"`
	LLM      *openai.Config  `json:"llm"`
}

type output struct {
	Summary      string        `json:"summary"`
	Insights     []Insight     `json:"insights"`
	Model        string        `json:"model"`
	Documents    int           `json:"documents"`
	Sentences    int           `json:"sentences"`
	Usage        *openai.Usage `json:"usage,omitempty"`
	FinishReason string        `json:"finish_reason,omitempty"`
}

const maxN = 50

func main() { toolkit.Main(tool, handle) }

func handle(ctx context.Context, env toolkit.Env, in input) (any, error) {
	docs, err := parseTexts(in.Texts)
	if err != nil {
		return nil, err
	}
	if llm := in.LLM; llm != nil && (llm.BaseURL != "" || llm.Model != "") {
		if err := llm.Validate(); err != nil {
			return nil, err
		}
		if env.Live() {
			return summarizeLLM(ctx, env, in, docs)
		}
		env.Log.Warn("llm is set but the sandbox has no egress proxy (the step declares no egress): summarizing extractively")
	}
	opts := ParsePrompt(string(in.Prompt))
	if in.N.Set {
		opts.N = in.N.Int(opts.N)
	}
	if in.MaxWords.Set {
		opts.MaxWords = in.MaxWords.Int(opts.MaxWords)
	}
	if opts.N < 1 || opts.N > maxN {
		return nil, toolkit.BadInput("number of insights must be between 1 and %d, got %d", maxN, opts.N)
	}
	res := Summarize(docs, opts)
	if len(res.Insights) == 0 {
		return nil, toolkit.BadInput("texts contain no sentences to summarize")
	}
	if len(res.Insights) < opts.N {
		env.Log.Warn("fewer sentences than insights requested", "requested", opts.N, "returned", len(res.Insights))
	}
	env.Log.Info("summarized", "documents", len(docs), "sentences", res.Sentences, "insights", len(res.Insights))
	return output{Summary: res.Markdown(), Insights: res.Insights, Model: "extractive-tf", Documents: len(docs), Sentences: res.Sentences}, nil
}

var blankLineRe = regexp.MustCompile(`\n\s*\n`)

// parseTexts accepts one string (documents separated by blank lines, the
// shape `items | map('content') | join('\n\n')` renders), a list of strings,
// or a list of feed items with title and content.
func parseTexts(raw json.RawMessage) ([]Doc, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, toolkit.BadInput("texts is required")
	}
	var docs []Doc
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, toolkit.BadInput("texts: %v", err)
		}
		for _, part := range blankLineRe.Split(s, -1) {
			if strings.TrimSpace(part) != "" {
				docs = append(docs, Doc{Content: part})
			}
		}
	case '[':
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, toolkit.BadInput("texts: %v", err)
		}
		for i, el := range list {
			var s string
			if err := json.Unmarshal(el, &s); err == nil {
				docs = append(docs, Doc{Content: s})
				continue
			}
			var d Doc
			if err := json.Unmarshal(el, &d); err != nil {
				return nil, toolkit.BadInput("texts[%d] is neither a string nor an object with content", i)
			}
			if d.Content == "" {
				d.Content = d.Description
			}
			docs = append(docs, d)
		}
	default:
		return nil, toolkit.BadInput("texts must be a string or a list, got %s", firstWord(raw))
	}
	if len(docs) == 0 {
		return nil, toolkit.BadInput("texts is empty")
	}
	return docs, nil
}

func firstWord(b []byte) string {
	s := string(b)
	if len(s) > 20 {
		s = s[:20]
	}
	return fmt.Sprintf("%q", s)
}
