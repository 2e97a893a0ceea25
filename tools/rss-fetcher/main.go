// Command rss-fetcher is the daily-news demo's feed reader. The sandbox has
// no network, so http(s) URLs are served from feeds compiled into the binary
// (keyed by URL); file:///workspace/... URLs read a feed a previous step or
// the workspace's git revision put there.
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
	Summary: "fetch and parse an RSS 2.0 or Atom feed (offline: embedded fixtures or file:///workspace/...)",
	Usage: `Input:  {"url": "https://techcrunch.com/feed/", "limit": 10}
        url: an embedded fixture URL, or file:///workspace/<path>
Output: {"feed_title", "url", "items": [{"title", "link", "content", "published"}]}
Embedded feeds: ` + strings.Join(fixtureURLs(), ", "),
}

type input struct {
	URL   string         `json:"url"`
	Limit toolkit.Number `json:"limit"`
}

type output struct {
	FeedTitle string `json:"feed_title"`
	URL       string `json:"url"`
	Items     []Item `json:"items"`
}

const defaultLimit, maxLimit = 10, 1000

func main() { toolkit.Main(tool, handle) }

func handle(_ context.Context, env toolkit.Env, in input) (any, error) {
	data, err := load(env, in.URL)
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
	return output{FeedTitle: feed.Title, URL: in.URL, Items: items}, nil
}

func load(env toolkit.Env, raw string) ([]byte, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || raw == "" {
		return nil, toolkit.BadInput("url %q is not a URL", raw)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, toolkit.BadInput("file URL %q must name a local path", raw)
		}
		if !strings.HasPrefix(u.Path, "/workspace/") {
			return nil, toolkit.BadInput("file URL %q must point under /workspace/", raw)
		}
		root, err := env.OpenWorkspace()
		if err != nil {
			return nil, err
		}
		defer root.Close()
		return toolkit.ReadFile(root, u.Path)
	case "http", "https":
		name, ok := fixtures[normaliseURL(u)]
		if !ok {
			return nil, fmt.Errorf("no network in the sandbox and no embedded feed for %s (embedded: %s; or use file:///workspace/...)",
				raw, strings.Join(fixtureURLs(), ", "))
		}
		return feedFS.ReadFile(name)
	default:
		return nil, toolkit.BadInput("url scheme %q not supported (https or file)", u.Scheme)
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
