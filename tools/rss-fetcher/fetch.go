package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

const (
	maxFeedBytes = 8 << 20
	fetchTimeout = 45 * time.Second
)

// fetch GETs a feed over the network (through the egress proxy when the
// sandbox has one) and returns its body and the URL it came from.
func fetch(ctx context.Context, env toolkit.Env, u *url.URL) ([]byte, *url.URL, error) {
	client, err := env.HTTPClient(toolkit.HTTPOptions{Timeout: fetchTimeout})
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, toolkit.BadInput("url %q: %v", u.String(), err)
	}
	req.Header.Set("Accept", "application/rss+xml, application/atom+xml, application/xml;q=0.9, text/xml;q=0.9, */*;q=0.1")
	req.Header.Set("User-Agent", "agentflow-rss-fetcher/"+strings.TrimSpace(version))
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, env.ExplainNoEgress(fmt.Errorf("fetch %s: %w", u, toolkit.WithoutURL(err)))
	}
	defer resp.Body.Close()
	final := resp.Request.URL
	if resp.StatusCode/100 != 2 {
		snippet, _ := toolkit.ReadBody(resp.Body, 512)
		msg := fmt.Sprintf("fetch %s: HTTP %s", final, resp.Status)
		if s := toolkit.Snippet(string(snippet), 200); s != "" && !strings.HasPrefix(s, "<") {
			msg += ": " + s
		}
		return nil, nil, errors.New(msg)
	}
	data, err := toolkit.ReadBody(resp.Body, maxFeedBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("fetch %s: %w", final, err)
	}
	env.Log.Info("feed fetched", "host", final.Host, "status", resp.StatusCode, "bytes", len(data), "duration_ms", time.Since(start).Milliseconds())
	return data, final, nil
}
