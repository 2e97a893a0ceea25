package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// Insights is the number of bullets the OpenAI stub answers.
const Insights = 3

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

func apiError(status int, typ, code, msg string) answer {
	return jsonAnswer(status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}})
}

// chatCompletion answers like OpenAI's chat completions endpoint, with a
// deterministic content: Insights bullets "- [Title]: sentence" taken
// from the last user message (see StubInsights).
func chatCompletion(cfg Config, r *http.Request, body []byte) answer {
	if r.Method != http.MethodPost {
		return apiError(http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "use POST")
	}
	if cfg.RequireAuth && !hasBearer(r) {
		return apiError(http.StatusUnauthorized, "invalid_request_error", "missing_api_key",
			"You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth.")
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return apiError(http.StatusBadRequest, "invalid_request_error", "invalid_json", "We could not parse the JSON body of your request: "+err.Error())
	}
	if req.Model == "" {
		return apiError(http.StatusBadRequest, "invalid_request_error", "missing_model", "you must provide a model parameter")
	}
	var user, all []string
	for _, m := range req.Messages {
		all = append(all, m.Content)
		if m.Role == "user" {
			user = append(user, m.Content)
		}
	}
	if len(user) == 0 {
		return apiError(http.StatusBadRequest, "invalid_request_error", "missing_messages", "messages must hold a user message")
	}
	content := strings.Join(StubInsights(user[len(user)-1], Insights), "\n")
	prompt, completion := words(strings.Join(all, " ")), words(content)
	return jsonAnswer(http.StatusOK, map[string]any{
		"id":      fmt.Sprintf("chatcmpl-upstream-%d", prompt),
		"object":  "chat.completion",
		"created": 1718438400,
		"model":   req.Model,
		"choices": []map[string]any{{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": content},
			"finish_reason": "stop",
		}},
		"usage": map[string]int{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
}

func words(s string) int { return len(strings.Fields(s)) }

var (
	blankLine = regexp.MustCompile(`\n\s*\n`)
	sentEnd   = regexp.MustCompile(`[.!?](\s|$)`)
	nonWord   = regexp.MustCompile(`[^\p{L}\p{N}'’-]+`)
)

// StubInsights derives n bullets from a user message shaped as the tools
// send it (prompt, blank line, text): paragraphs after the first (the
// prompt) in order, one per bullet, each the paragraph's first sentence
// cut to 20 words, titled by its first three words. Fewer paragraphs
// than n give fewer bullets; a message of one paragraph is all text.
func StubInsights(msg string, n int) []string {
	var paras []string
	for _, p := range blankLine.Split(strings.ReplaceAll(msg, "\r\n", "\n"), -1) {
		if p = strings.Join(strings.Fields(p), " "); p != "" {
			paras = append(paras, p)
		}
	}
	if len(paras) > 1 {
		paras = paras[1:]
	}
	var out []string
	for _, p := range paras {
		if len(out) == n {
			break
		}
		s := p
		if loc := sentEnd.FindStringIndex(p); loc != nil {
			s = p[:loc[0]+1]
		}
		ws := strings.Fields(s)
		if len(ws) > 20 {
			ws = ws[:20]
		}
		title := strings.TrimSpace(nonWord.ReplaceAllString(strings.Join(ws[:min(3, len(ws))], " "), " "))
		out = append(out, "- ["+title+"]: "+strings.Join(ws, " "))
	}
	return out
}
