// Command slack-notifier is the daily-news demo's Slack step. It validates
// the message the way Slack would (blocks must be JSON: an array of typed
// blocks within Slack's limits). In a sandbox with the egress boundary (a
// proxy in the environment) it posts the payload: to an incoming webhook
// (webhook_url), or to the Web API (api_url, e.g. chat.postMessage) whose
// bot token the egress proxy adds as a brokered Authorization header, so
// the tool holds no secret. Without the boundary the sandbox has no
// network, so it queues the exact payload in /workspace/outbox/slack-<n>.json
// for a relay outside the sandbox. The webhook URL is a secret: it is
// checked, never printed, logged or written to the workspace, also not
// inside an error.
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
	Summary: "post a Slack message (live through the egress proxy; offline: queue its payload in /workspace/outbox/)",
	Usage: `Input:  {"webhook_url": "https://hooks.slack.com/services/...", "channel": "C012AB3CD",
         "text": "fallback text", "blocks": "[{...}]" | [{...}], "mode": "auto"}
        or "api_url": "https://slack.com/api/chat.postMessage" instead of webhook_url
        mode: auto (default): post when the sandbox has the egress boundary
              (HTTPS_PROXY set), else queue; live: always post; offline: queue.
Output: live:    {"ok": true, "status": 200, "posted": "webhook"|"api", "channel",
                  "blocks": N, "repaired": false, "ts"}
        offline: {"ok": true, "queued": "outbox/slack-1.json", "channel", "blocks": N, "repaired": false}
blocks given as a string is parsed as JSON; control characters and stray
quotes that a template pasted into a JSON string are escaped ("repaired": true).
Live, a non-2xx answer, a redirect (never followed) or Slack's {"ok": false}
fails the step. For api_url the bot token is a brokered header of the
step's egress entry, never an input:
  egress:
    - host: "slack.com:443"
      headers: {Authorization: "Bearer {{ .secrets.slack_bot_token }}"}
The webhook URL is never echoed.`,
}

type input struct {
	WebhookURL string          `json:"webhook_url"`
	APIURL     string          `json:"api_url"`
	Channel    string          `json:"channel"`
	Text       toolkit.Text    `json:"text"`
	Blocks     json.RawMessage `json:"blocks"`
	Mode       toolkit.Mode    `json:"mode"`
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

func handle(ctx context.Context, env toolkit.Env, in input) (any, error) {
	dest, err := checkDestination(in)
	if err != nil {
		return nil, err
	}
	p, repaired, err := BuildPayload(in)
	if err != nil {
		return nil, err
	}
	online, err := env.UseNetwork(in.Mode)
	if err != nil {
		return nil, err
	}
	if online {
		return post(ctx, env, dest, p, repaired)
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

// destination is where a live message goes.
type destination struct {
	kind  string // "webhook" or "api"
	field string // the input field it came from
	url   *url.URL
}

// checkDestination validates webhook_url or api_url (exactly one).
func checkDestination(in input) (destination, error) {
	hook, api := strings.TrimSpace(in.WebhookURL), strings.TrimSpace(in.APIURL)
	switch {
	case hook != "" && api != "":
		return destination{}, toolkit.BadInput("give webhook_url or api_url, not both")
	case api != "":
		u, err := checkURL("api_url", api)
		return destination{kind: "api", field: "api_url", url: u}, err
	default:
		u, err := checkURL("webhook_url", hook)
		return destination{kind: "webhook", field: "webhook_url", url: u}, err
	}
}

// checkURL validates a (possibly secret) URL without ever putting it in
// an error: url.Parse's own errors quote the input, so they are not
// wrapped.
func checkURL(field, raw string) (*url.URL, error) {
	if raw == "" {
		return nil, toolkit.BadInput("webhook_url is required (or api_url for Slack's Web API)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, toolkit.BadInput("%s is not a valid URL", field)
	}
	local := u.Hostname() == "localhost" || strings.HasPrefix(u.Hostname(), "127.")
	if u.Host == "" || !(u.Scheme == "https" || (u.Scheme == "http" && local)) {
		return nil, toolkit.BadInput("%s must be an https URL (http only for localhost)", field)
	}
	if u.User != nil {
		return nil, toolkit.BadInput("%s must not carry credentials", field)
	}
	return u, nil
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
