// Package openai is the one chat-completions client of agentflow's tools
// (tools/llm, tools/llm-summarizer): POST {base_url}/v1/chat/completions
// of an OpenAI-compatible API. It holds no API key and sends no
// Authorization header: in a sandbox with the egress boundary the key is
// a brokered header that the egress proxy adds on the way out (the spec's
// egress entry {host: "api.openai.com:443", headers: {Authorization:
// "Bearer {{ .secrets.OPENAI_API_KEY }}"}}), so the tool never sees it.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

// MaxResponse bounds an API answer.
const MaxResponse = 4 << 20

// maxErrorMessage bounds the API's error message quoted in an error.
const maxErrorMessage = 500

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is a chat completion request.
type Request struct {
	Model       string    `json:"model"`
	Messages    []Message `json:"messages"`
	Temperature *float64  `json:"temperature,omitempty"`
	MaxTokens   *int      `json:"max_tokens,omitempty"`
}

// Usage is the token accounting of one completion.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Result is the first choice of a completion.
type Result struct {
	Content      string `json:"content"`
	Model        string `json:"model"`
	Usage        Usage  `json:"usage"`
	FinishReason string `json:"finish_reason"`
}

// APIError is a non-2xx answer of the API.
type APIError struct {
	StatusCode int
	Status     string // "401 Unauthorized"
	Message    string // the API's error.message (or the start of the body), bounded
	Type       string
	Code       string
}

func (e *APIError) Error() string {
	msg := "chat completions: HTTP " + e.Status
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Messages builds the conversation the tools send: an optional system
// message, then one user message holding prompt, a blank line and text
// (either may be empty, and then there is no blank line).
func Messages(system, prompt, text string) []Message {
	var msgs []Message
	if strings.TrimSpace(system) != "" {
		msgs = append(msgs, Message{Role: "system", Content: system})
	}
	user := prompt
	switch {
	case strings.TrimSpace(prompt) == "":
		user = text
	case strings.TrimSpace(text) != "":
		user = strings.TrimRight(prompt, "\n") + "\n\n" + text
	}
	return append(msgs, Message{Role: "user", Content: user})
}

// Endpoint is the chat completions URL of an API base URL: base_url may
// be the server ("https://api.openai.com") or already end in /v1.
func Endpoint(baseURL string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "", toolkit.BadInput("base_url %q must be an http(s) URL such as https://api.openai.com", baseURL)
	}
	if u.User != nil {
		return "", toolkit.BadInput("base_url must not carry credentials (the API key is a brokered header)")
	}
	u.RawQuery, u.Fragment = "", ""
	p := strings.TrimRight(u.Path, "/")
	if !strings.HasSuffix(p, "/v1") {
		p += "/v1"
	}
	u.Path = p + "/chat/completions"
	return u.String(), nil
}

// Client calls one API.
type Client struct {
	HTTP      *http.Client
	BaseURL   string
	UserAgent string
}

// Chat sends req and returns the first choice.
func (c *Client) Chat(ctx context.Context, req Request) (Result, error) {
	endpoint, err := Endpoint(c.BaseURL)
	if err != nil {
		return Result{}, err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return Result{}, fmt.Errorf("encode chat request: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return Result{}, fmt.Errorf("chat completions: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	if c.UserAgent != "" {
		hr.Header.Set("User-Agent", c.UserAgent)
	}
	resp, err := c.HTTP.Do(hr)
	if err != nil {
		return Result{}, fmt.Errorf("chat completions at %s: %w", hostOf(endpoint), toolkit.WithoutURL(err))
	}
	defer resp.Body.Close()
	data, err := toolkit.ReadBody(resp.Body, MaxResponse)
	if err != nil {
		return Result{}, fmt.Errorf("chat completions: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return Result{}, apiError(resp, data)
	}
	var out struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
				Refusal *string `json:"refusal"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage Usage `json:"usage"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return Result{}, fmt.Errorf("chat completions: answer is not a chat completion: %v", err)
	}
	if len(out.Choices) == 0 {
		return Result{}, errors.New("chat completions: answer has no choices")
	}
	ch := out.Choices[0]
	res := Result{Model: out.Model, Usage: out.Usage, FinishReason: ch.FinishReason}
	switch {
	case ch.Message.Content != nil:
		res.Content = *ch.Message.Content
	case ch.Message.Refusal != nil:
		return Result{}, fmt.Errorf("chat completions: the model refused: %s", toolkit.Snippet(*ch.Message.Refusal, maxErrorMessage))
	}
	if res.Model == "" {
		res.Model = req.Model
	}
	return res, nil
}

// apiError reads OpenAI's {"error": {"message", "type", "code"}}, else
// quotes the start of the body.
func apiError(resp *http.Response, data []byte) error {
	e := &APIError{StatusCode: resp.StatusCode, Status: resp.Status}
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && len(body.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		}
		var s string
		switch {
		case json.Unmarshal(body.Error, &obj) == nil:
			e.Message, e.Type = obj.Message, obj.Type
			if obj.Code != nil {
				e.Code = fmt.Sprint(obj.Code)
			}
		case json.Unmarshal(body.Error, &s) == nil:
			e.Message = s
		}
	}
	if e.Message == "" {
		e.Message = string(data)
	}
	e.Message = toolkit.Snippet(e.Message, maxErrorMessage)
	return e
}

func hostOf(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "the API"
	}
	return u.Host
}
