package openai

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

// Timeout bounds one completion; the step's own timeout usually ends it
// first.
const Timeout = 5 * time.Minute

// Config is how a spec points a tool at an API (tools/llm takes these
// fields at the top level of its input, llm-summarizer under "llm").
type Config struct {
	BaseURL     string         `json:"base_url"`
	Model       string         `json:"model"`
	System      toolkit.Text   `json:"system"`
	MaxTokens   toolkit.Number `json:"max_tokens"`
	Temperature toolkit.Number `json:"temperature"`
}

// Validate checks the configuration as bad input.
func (c Config) Validate() error {
	if _, err := Endpoint(c.BaseURL); err != nil {
		return err
	}
	if m := strings.TrimSpace(c.Model); m == "" || strings.ContainsAny(m, " \t\r\n") {
		return toolkit.BadInput("model %q must be a model name such as gpt-4o-mini", c.Model)
	}
	if c.MaxTokens.Set && (c.MaxTokens.Value < 1 || c.MaxTokens.Value > 1_000_000 || c.MaxTokens.Value != float64(int(c.MaxTokens.Value))) {
		return toolkit.BadInput("max_tokens must be a whole number between 1 and 1000000")
	}
	if c.Temperature.Set && (c.Temperature.Value < 0 || c.Temperature.Value > 2) {
		return toolkit.BadInput("temperature must be between 0 and 2")
	}
	return nil
}

// Request builds the chat request for prompt and text.
func (c Config) Request(prompt, text string) Request {
	r := Request{Model: strings.TrimSpace(c.Model), Messages: Messages(string(c.System), prompt, text)}
	if c.Temperature.Set {
		v := c.Temperature.Value
		r.Temperature = &v
	}
	if c.MaxTokens.Set {
		v := int(c.MaxTokens.Value)
		r.MaxTokens = &v
	}
	return r
}

// Complete validates cfg and runs one completion with the environment's
// network (the egress proxy and its CA bundle). A failure to reach the
// API in a sandbox without the egress boundary says so.
func Complete(ctx context.Context, env toolkit.Env, cfg Config, prompt, text, userAgent string) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	httpc, err := env.HTTPClient(toolkit.HTTPOptions{Timeout: Timeout, MaxRedirects: -1})
	if err != nil {
		return Result{}, err
	}
	c := &Client{HTTP: httpc, BaseURL: cfg.BaseURL, UserAgent: userAgent}
	res, err := c.Chat(ctx, cfg.Request(prompt, text))
	var ae *APIError
	if errors.As(err, &ae) {
		return res, err // the API answered: the network is fine
	}
	return res, env.ExplainNoEgress(err)
}
