package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentflow/agentflow/tools/internal/openai"
	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

// summarizeLLM asks the configured API: the prompt (or a default one
// built from n / max_words), then the documents.
func summarizeLLM(ctx context.Context, env toolkit.Env, in input, docs []Doc) (any, error) {
	prompt := string(in.Prompt)
	if strings.TrimSpace(prompt) == "" {
		prompt = defaultPrompt(in)
	}
	res, err := openai.Complete(ctx, env, *in.LLM, prompt, renderDocs(docs), "agentflow-llm-summarizer/"+strings.TrimSpace(version))
	if err != nil {
		return nil, err
	}
	summary := strings.TrimSpace(res.Content)
	if summary == "" {
		return nil, fmt.Errorf("the model returned no content (finish_reason %q)", res.FinishReason)
	}
	insights := parseBullets(summary)
	if len(insights) == 0 {
		env.Log.Warn("the model's answer has no \"- [Title]: text\" lines; insights is empty")
	}
	usage := res.Usage
	env.Log.Info("summarized by model", "model", res.Model, "documents", len(docs), "insights", len(insights),
		"prompt_tokens", usage.PromptTokens, "completion_tokens", usage.CompletionTokens)
	return output{Summary: summary, Insights: insights, Model: res.Model, Documents: len(docs), Usage: &usage, FinishReason: res.FinishReason}, nil
}

func defaultPrompt(in input) string {
	n := in.N.Int(3)
	p := fmt.Sprintf("Extract exactly %d key insights from the following texts.\nFormat each insight as: - [Insight title]: [Concise explanation", n)
	if in.MaxWords.Set {
		p += fmt.Sprintf(", max %d words", in.MaxWords.Int(0))
	}
	return p + "].\nDo not add introduction or conclusion."
}

// renderDocs joins the documents with blank lines, each under its title
// when it has one.
func renderDocs(docs []Doc) string {
	parts := make([]string, len(docs))
	for i, d := range docs {
		parts[i] = strings.TrimSpace(d.Content)
		if t := strings.TrimSpace(d.Title); t != "" {
			parts[i] = t + "\n" + parts[i]
		}
	}
	return strings.Join(parts, "\n\n")
}

var bulletLineRe = regexp.MustCompile(`^\s*(?:[-*•]|\d+[.)])\s*\[([^\]]+)\]\s*:\s*(.+?)\s*$`)

// parseBullets reads "- [Title]: explanation" lines (also "*", "•" or
// "1." bullets); Source is -1: the model, not one document.
func parseBullets(s string) []Insight {
	out := []Insight{}
	for _, line := range strings.Split(s, "\n") {
		if m := bulletLineRe.FindStringSubmatch(line); m != nil {
			out = append(out, Insight{Title: strings.TrimSpace(m[1]), Explanation: m[2], Source: -1})
		}
	}
	return out
}
