// Command slack-notifier is the daily-news demo's Slack step. The sandbox has
// no network, so instead of posting it validates the message the way Slack
// would (blocks must be JSON: an array of typed blocks within Slack's limits)
// and queues the exact API payload in /workspace/outbox/slack-<n>.json; a
// relay outside the sandbox, which holds the webhook secret itself, can post
// it. The webhook URL is a secret: it is checked, never printed, logged or
// written to the workspace.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

//go:embed VERSION
var version string

var tool = toolkit.Tool{
	Name:    "slack-notifier",
	Version: version,
	Summary: "validate a Slack message and queue its payload in /workspace/outbox/ (offline stand-in)",
	Usage: `Input:  {"webhook_url": "https://hooks.slack.com/services/...", "channel": "C012AB3CD",
         "text": "fallback text", "blocks": "[{...}]" | [{...}]}
Output: {"ok": true, "queued": "outbox/slack-1.json", "channel", "blocks": N, "repaired": false}
blocks given as a string is parsed as JSON; control characters and stray
quotes that a template pasted into a JSON string are escaped ("repaired": true).
The webhook URL is never echoed.`,
}

type input struct {
	WebhookURL string          `json:"webhook_url"`
	Channel    string          `json:"channel"`
	Text       toolkit.Text    `json:"text"`
	Blocks     json.RawMessage `json:"blocks"`
}

// Payload is what Slack's chat.postMessage / incoming webhook receives.
type Payload struct {
	Channel string           `json:"channel,omitempty"`
	Text    string           `json:"text,omitempty"`
	Blocks  []map[string]any `json:"blocks,omitempty"`
}

const (
	maxBlocks      = 50   // Slack's limit per message
	maxSectionText = 3000 // Slack's limit for a section's text
	maxText        = 40000
)

var channelRe = regexp.MustCompile(`^[#@]?[A-Za-z0-9._-]{1,80}$`)

func main() { toolkit.Main(tool, handle) }

func handle(_ context.Context, env toolkit.Env, in input) (any, error) {
	if err := checkWebhook(in.WebhookURL); err != nil {
		return nil, err
	}
	p, repaired, err := BuildPayload(in)
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode payload: %w", err)
	}
	root, err := env.OpenWorkspace()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	path, err := toolkit.NextName(root, "outbox", "slack-", ".json")
	if err != nil {
		return nil, err
	}
	if err := toolkit.WriteFile(root, path, append(data, '\n')); err != nil {
		return nil, err
	}
	env.Log.Info("slack message queued", "path", path, "blocks", len(p.Blocks), "repaired", repaired)
	return map[string]any{"ok": true, "queued": path, "channel": p.Channel, "blocks": len(p.Blocks), "repaired": repaired}, nil
}

// checkWebhook validates the secret without ever putting it in an error:
// url.Parse's own errors quote the input, so they are not wrapped.
func checkWebhook(raw string) error {
	if strings.TrimSpace(raw) == "" {
		return toolkit.BadInput("webhook_url is required")
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return toolkit.BadInput("webhook_url is not a valid URL")
	}
	local := u.Hostname() == "localhost" || strings.HasPrefix(u.Hostname(), "127.")
	if u.Host == "" || !(u.Scheme == "https" || (u.Scheme == "http" && local)) {
		return toolkit.BadInput("webhook_url must be an https URL (http only for localhost)")
	}
	return nil
}

// BuildPayload validates channel, text and blocks; repaired reports whether
// the blocks string needed escaping to parse.
func BuildPayload(in input) (Payload, bool, error) {
	p := Payload{Channel: strings.TrimSpace(in.Channel), Text: string(in.Text)}
	if p.Channel != "" && !channelRe.MatchString(p.Channel) {
		return Payload{}, false, toolkit.BadInput("channel %q is not a Slack channel id or name", p.Channel)
	}
	if len(p.Text) > maxText {
		return Payload{}, false, toolkit.BadInput("text is %d bytes; Slack truncates above %d", len(p.Text), maxText)
	}
	blocks, repaired, err := parseBlocks(in.Blocks)
	if err != nil {
		return Payload{}, false, err
	}
	p.Blocks = blocks
	if strings.TrimSpace(p.Text) == "" && len(p.Blocks) == 0 {
		return Payload{}, false, toolkit.BadInput("text or blocks is required")
	}
	return p, repaired, nil
}
