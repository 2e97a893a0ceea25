// Command rss-fetcher is the daily-news demo's feed reader. In a sandbox
// with the egress boundary (a proxy in the environment, the step declares
// egress:) it fetches http(s) URLs over the network through the proxy;
// without one the sandbox has no network, so http(s) URLs are served from
// feeds compiled into the binary (keyed by URL). file:///workspace/... URLs
// read a feed a previous step or the workspace's git revision put there.
package main

import (
	"context"
	"embed"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

//go:embed VERSION
var version string

//go:embed feeds/*.xml
var feedFS embed.FS

// fixtures maps a normalised feed URL to an embedded file.
var fixtures = map[string]string{
	"https://techcrunch.com/feed":                "feeds/techcrunch.xml",
	"https://example.com/agentflow/releases.xml": "feeds/agentflow-releases.xml",
}

var tool = toolkit.Tool{
	Name:    "rss-fetcher",
	Version: version,
	Summary: "fetch and parse an RSS 2.0 or Atom feed (live through the egress proxy; offline: embedded fixtures or file:///workspace/...)",
	Usage: `Input:  {"url": "https://techcrunch.com/feed/", "limit": 10, "mode": "auto"}
        url: http(s) URL, or file:///workspace/<path>
        mode: auto (default): fetch over the network when the sandbox has the
              egress boundary (HTTPS_PROXY set: the step declares egress, e.g.
              egress: ["techcrunch.com:443"]), else serve an embedded fixture;
              live: always fetch (directly when no proxy is set);
              offline: never fetch.
Output: {"feed_title", "url", "items": [{"title", "link", "content", "published"}]}
        live fetches add "source": "network" and, after a redirect, "final_url".
Live: the proxy's CA bundle is SSL_CERT_FILE; bodies over 8 MiB, non-2xx
answers and a proxy's refusal fail the step; redirects (at most 5, never
https to http) are new requests the proxy checks like any other, and are
logged.
Embedded feeds: ` + strings.Join(fixtureURLs(), ", "),
}

type input struct {
	URL   string         `json:"url"`
	Limit toolkit.Number `json:"limit"`
	Mode  toolkit.Mode   `json:"mode"`
}

type output struct {
	FeedTitle string `json:"feed_title"`
	URL       string `json:"url"`
	Items     []Item `json:"items"`
	Source    string `json:"source,omitempty"`    // "network" for a live fetch
	FinalURL  string `json:"final_url,omitempty"` // after redirects, when it differs
}

const defaultLimit, maxLimit = 10, 1000

func main() { toolkit.Main(tool, handle) }

func handle(ctx context.Context, env toolkit.Env, in input) (any, error) {
	online, err := env.UseNetwork(in.Mode)
	if err != nil {
		return nil, err
	}
	data, fetched, err := load(ctx, env, in.URL, online)
	if err != nil {
		return nil, err
	}
	feed, err := Parse(data)
	if err != nil {
		return nil, err
	}
	limit := in.Limit.Int(defaultLimit)
	if limit <= 0 || limit > maxLimit {
		return nil, toolkit.BadInput("limit must be between 1 and %d", maxLimit)
	}
	items := feed.Items
	if len(items) > limit {
		items = items[:limit]
	}
	env.Log.Info("feed parsed", "items", len(feed.Items), "returned", len(items))
	out := output{FeedTitle: feed.Title, URL: in.URL, Items: items}
	if fetched != nil {
		out.Source = "network"
		if fetched.String() != strings.TrimSpace(in.URL) {
			out.FinalURL = fetched.String()
		}
	}
	return out, nil
}

// load returns the feed's bytes and, for a network fetch, the URL it
// finally came from.
func load(ctx context.Context, env toolkit.Env, raw string, online bool) ([]byte, *url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || raw == "" {
		return nil, nil, toolkit.BadInput("url %q is not a URL", raw)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, nil, toolkit.BadInput("file URL %q must name a local path", raw)
		}
		if !strings.HasPrefix(u.Path, "/workspace/") {
			return nil, nil, toolkit.BadInput("file URL %q must point under /workspace/", raw)
		}
		root, err := env.OpenWorkspace()
		if err != nil {
			return nil, nil, err
		}
		defer root.Close()
		data, err := toolkit.ReadFile(root, u.Path)
		return data, nil, err
	case "http", "https":
		if online {
			if u.Host == "" {
				return nil, nil, toolkit.BadInput("url %q has no host", raw)
			}
			return fetch(ctx, env, u)
		}
		name, ok := fixtures[normaliseURL(u)]
		if !ok {
			return nil, nil, fmt.Errorf("no network in the sandbox and no embedded feed for %s (embedded: %s; or use file:///workspace/...)",
				raw, strings.Join(fixtureURLs(), ", "))
		}
		data, err := feedFS.ReadFile(name)
		return data, nil, err
	default:
		return nil, nil, toolkit.BadInput("url scheme %q not supported (https or file)", u.Scheme)
	}
}

// normaliseURL makes http/https, host case and a trailing slash irrelevant.
func normaliseURL(u *url.URL) string {
	return "https://" + strings.ToLower(u.Host) + strings.TrimSuffix(u.Path, "/")
}

func fixtureURLs() []string {
	urls := make([]string, 0, len(fixtures))
	for u := range fixtures {
		urls = append(urls, u+"/")
	}
	sort.Strings(urls)
	for i, u := range urls {
		if strings.HasSuffix(u, ".xml/") {
			urls[i] = strings.TrimSuffix(u, "/")
		}
	}
	return urls
}
