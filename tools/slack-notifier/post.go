package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

const (
	postTimeout = 20 * time.Second
	maxAnswer   = 1 << 20
)

// post sends the payload to Slack. Nothing it returns or logs holds the
// destination's path or query (a webhook's secret): errors name the host
// only, and the answer is quoted with the URL's parts redacted.
func post(ctx context.Context, env toolkit.Env, dest destination, p Payload, repaired bool) (any, error) {
	client, err := env.HTTPClient(toolkit.HTTPOptions{Timeout: postTimeout, MaxRedirects: -1})
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode payload: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dest.url.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request for %s", dest.field) // err would quote the URL
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("User-Agent", "agentflow-slack-notifier/"+strings.TrimSpace(version))
	what := fmt.Sprintf("slack %s at %s", dest.kind, dest.url.Host)
	resp, err := client.Do(req)
	if err != nil {
		return nil, env.ExplainNoEgress(fmt.Errorf("post to %s: %w", what, redactErr(toolkit.WithoutURL(err), dest.url)))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 3 {
		return nil, fmt.Errorf("%s answered HTTP %s (redirects are not followed)", what, resp.Status)
	}
	data, err := toolkit.ReadBody(resp.Body, maxAnswer)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if resp.StatusCode/100 != 2 {
		msg := fmt.Sprintf("%s answered HTTP %s", what, resp.Status)
		if s := redact(toolkit.Snippet(string(data), 200), dest.url); s != "" {
			msg += ": " + s
		}
		return nil, errors.New(msg)
	}
	// Incoming webhooks answer "ok"; the Web API answers 200 with
	// {"ok": false, "error": "..."} on failure.
	var answer struct {
		OK      *bool  `json:"ok"`
		Error   string `json:"error"`
		Channel string `json:"channel"`
		TS      string `json:"ts"`
	}
	if json.Unmarshal(data, &answer) == nil && answer.OK != nil && !*answer.OK {
		reason := answer.Error
		if reason == "" {
			reason = "no error given"
		}
		return nil, fmt.Errorf("%s answered ok=false: %s", what, redact(toolkit.Snippet(reason, 200), dest.url))
	}
	channel := p.Channel
	if answer.Channel != "" {
		channel = answer.Channel
	}
	env.Log.Info("slack message posted", "via", dest.kind, "host", dest.url.Host, "status", resp.StatusCode, "blocks", len(p.Blocks), "repaired", repaired)
	out := map[string]any{"ok": true, "status": resp.StatusCode, "posted": dest.kind, "channel": channel, "blocks": len(p.Blocks), "repaired": repaired}
	if answer.TS != "" {
		out["ts"] = answer.TS
	}
	return out, nil
}

// redact removes from s every part of u that could be its secret: the
// whole URL, the path, the query and each path segment of 6 or more
// characters (a server's 404 page may quote the path it was asked for).
func redact(s string, u *url.URL) string {
	parts := []string{u.String(), u.EscapedPath(), u.Path, u.RawQuery}
	for _, seg := range strings.Split(u.Path, "/") {
		if len(seg) >= 6 {
			parts = append(parts, seg, url.PathEscape(seg))
		}
	}
	for _, p := range parts {
		if p != "" && p != "/" {
			s = strings.ReplaceAll(s, p, "[redacted]")
		}
	}
	return s
}

// redactErr keeps err's chain (for errors.As) but redacts its message.
func redactErr(err error, u *url.URL) error {
	msg := err.Error()
	if r := redact(msg, u); r != msg {
		return errors.New(r)
	}
	return err
}
