// Command llm-summarizer is the daily-news demo's stand-in for an LLM: an
// extractive summarizer (sentences scored by word frequency) that honours the
// parts of the prompt a pipeline depends on — how many insights ("exactly 3")
// and how long each may be ("max 20 words") — and the "- [Title]: text"
// bullet format. Deterministic, CPU-only, no model weights.
package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

//go:embed VERSION
var version string

var tool = toolkit.Tool{
	Name:    "llm-summarizer",
	Version: version,
	Summary: "extract N key insights from texts (extractive stand-in for an LLM)",
	Usage: `Input:  {"texts": "doc one...\n\ndoc two..." | ["doc", ...] | [{"title","content"}, ...],
         "prompt": "... exactly 3 key insights ... max 20 words",
         "n": 3, "max_words": 20}            (n / max_words override the prompt)
Output: {"summary": "- [Title]: explanation\n...", "insights": [{"title","explanation","source"}],
         "model": "extractive-tf", "documents": N, "sentences": N}`,
}

type input struct {
	Texts    json.RawMessage `json:"texts"`
	Prompt   toolkit.Text    `json:"prompt"`
	N        toolkit.Number  `json:"n"`
	MaxWords toolkit.Number  `json:"max_words"`
}

type output struct {
	Summary   string    `json:"summary"`
	Insights  []Insight `json:"insights"`
	Model     string    `json:"model"`
	Documents int       `json:"documents"`
	Sentences int       `json:"sentences"`
}

const maxN = 50

func main() { toolkit.Main(tool, handle) }

func handle(_ context.Context, env toolkit.Env, in input) (any, error) {
	docs, err := parseTexts(in.Texts)
	if err != nil {
		return nil, err
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
