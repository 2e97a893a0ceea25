package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
	"github.com/stretchr/testify/require"
)

func TestParseFixtures(t *testing.T) {
	data, err := feedFS.ReadFile("feeds/techcrunch.xml")
	require.NoError(t, err)
	f, err := Parse(data)
	require.NoError(t, err)
	require.Equal(t, "TechCrunch", f.Title)
	require.Len(t, f.Items, 10)
	first := f.Items[0]
	require.Equal(t, "Lumen Robotics raises $120M to put warehouse robots on a subscription", first.Title)
	require.Equal(t, "2024-06-15T07:42:10Z", first.Published)
	require.True(t, strings.HasPrefix(first.Content, "Lumen Robotics has closed a $120 million Series C"), first.Content)
	for _, it := range f.Items {
		require.NotContains(t, it.Content, "<", "markup stripped")
		require.NotEmpty(t, it.Link)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name      string
		doc       string
		wantTitle string
		want      []Item
		wantErr   string
	}{
		{
			name:      "rss description only, entities",
			doc:       `<rss version="2.0"><channel><title>T</title><item><title> A &amp; B </title><link>http://x/1</link><pubDate>Mon, 03 Jun 2024 12:00:00 GMT</pubDate><description>&lt;p&gt;Hi &amp;amp; bye&lt;/p&gt;</description></item></channel></rss>`,
			wantTitle: "T",
			want:      []Item{{Title: "A & B", Link: "http://x/1", Content: "Hi & bye", Published: "2024-06-03T12:00:00Z"}},
		},
		{
			name:      "atom",
			doc:       `<feed xmlns="http://www.w3.org/2005/Atom"><title>F</title><entry><title>E</title><link rel="alternate" href="http://x/e"/><summary>S</summary><updated>2024-06-01T10:00:00+02:00</updated></entry></feed>`,
			wantTitle: "F",
			want:      []Item{{Title: "E", Link: "http://x/e", Content: "S", Published: "2024-06-01T08:00:00Z"}},
		},
		{name: "unparseable date kept", doc: `<rss><channel><item><title>x</title><pubDate>yesterday</pubDate></item></channel></rss>`, want: []Item{{Title: "x", Published: "yesterday"}}},
		{name: "html page", doc: `<html><body>nope</body></html>`, wantErr: "neither <rss> nor <feed>"},
		{name: "not xml", doc: `{"a":1}`, wantErr: "no root element"},
		{name: "broken xml", doc: `<rss><channel><item><title>x</item></channel></rss>`, wantErr: "parse RSS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.doc))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantTitle, f.Title)
			require.Equal(t, tt.want, f.Items)
		})
	}
}

func TestHandle(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "feed.xml"), []byte(`<rss><channel><title>Local</title><item><title>one</title></item><item><title>two</title></item></channel></rss>`), 0o644))
	tests := []struct {
		name      string
		stdin     string
		wantCode  int
		wantItems int
		wantTitle string
		wantErr   string
	}{
		{name: "seed url with limit", stdin: `{"url":"https://techcrunch.com/feed/","limit":3}`, wantItems: 3, wantTitle: "TechCrunch"},
		{name: "url variants and string limit", stdin: `{"url":"http://TechCrunch.com/feed","limit":"10"}`, wantItems: 10, wantTitle: "TechCrunch"},
		{name: "workspace file", stdin: `{"url":"file:///workspace/feed.xml"}`, wantItems: 2, wantTitle: "Local"},
		{name: "unknown url", stdin: `{"url":"https://example.org/rss"}`, wantCode: 1, wantErr: "no network in the sandbox"},
		{name: "file outside workspace", stdin: `{"url":"file:///etc/passwd"}`, wantCode: 2, wantErr: "under /workspace/"},
		{name: "bad limit", stdin: `{"url":"https://techcrunch.com/feed/","limit":0}`, wantCode: 2, wantErr: "limit"},
		{name: "ftp", stdin: `{"url":"ftp://x/y"}`, wantCode: 2, wantErr: "scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			code := toolkit.Run(t.Context(), tool, toolkit.IO{
				Stdin: strings.NewReader(tt.stdin), Stdout: &out, Stderr: &bytes.Buffer{},
				Getenv: func(k string) string { return map[string]string{"AGENTFLOW_WORKSPACE": dir}[k] },
			}, handle)
			require.Equal(t, tt.wantCode, code, out.String())
			var got struct {
				FeedTitle string `json:"feed_title"`
				Items     []Item `json:"items"`
				Error     string `json:"error"`
			}
			require.NoError(t, json.Unmarshal(out.Bytes(), &got))
			if tt.wantErr == "" {
				require.Empty(t, got.Error)
			}
			require.Contains(t, got.Error, tt.wantErr)
			require.Len(t, got.Items, tt.wantItems)
			require.Equal(t, tt.wantTitle, got.FeedTitle)
		})
	}
}
