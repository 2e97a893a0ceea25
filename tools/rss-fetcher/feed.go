package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"html"
	"regexp"
	"strings"
	"time"
)

// Item is one feed entry as the tool returns it.
type Item struct {
	Title     string `json:"title"`
	Link      string `json:"link"`
	Content   string `json:"content"`
	Published string `json:"published"` // RFC 3339 UTC when parseable, else as given
}

// Feed is a parsed feed.
type Feed struct {
	Title string
	Items []Item
}

type rssDoc struct {
	XMLName xml.Name `xml:"rss"`
	Channel struct {
		Title string    `xml:"title"`
		Items []rssItem `xml:"item"`
	} `xml:"channel"`
}

type rssItem struct {
	Title       string `xml:"title"`
	Link        string `xml:"link"`
	Description string `xml:"description"`
	Encoded     string `xml:"http://purl.org/rss/1.0/modules/content/ encoded"`
	PubDate     string `xml:"pubDate"`
}

type atomDoc struct {
	XMLName xml.Name    `xml:"http://www.w3.org/2005/Atom feed"`
	Title   string      `xml:"title"`
	Entries []atomEntry `xml:"entry"`
}

type atomEntry struct {
	Title string `xml:"title"`
	Links []struct {
		Href string `xml:"href,attr"`
		Rel  string `xml:"rel,attr"`
	} `xml:"link"`
	Summary   string `xml:"summary"`
	Content   string `xml:"content"`
	Published string `xml:"published"`
	Updated   string `xml:"updated"`
}

// Parse reads RSS 2.0 or Atom 1.0. Content is plain text: the richest body
// the entry has (content:encoded, else description), tags stripped.
func Parse(data []byte) (Feed, error) {
	root, err := rootElement(data)
	if err != nil {
		return Feed{}, err
	}
	switch root {
	case "rss":
		var doc rssDoc
		if err := xml.Unmarshal(data, &doc); err != nil {
			return Feed{}, fmt.Errorf("parse RSS: %w", err)
		}
		f := Feed{Title: strings.TrimSpace(doc.Channel.Title), Items: []Item{}}
		for _, it := range doc.Channel.Items {
			body := it.Encoded
			if strings.TrimSpace(body) == "" {
				body = it.Description
			}
			f.Items = append(f.Items, Item{
				Title: clean(it.Title), Link: strings.TrimSpace(it.Link),
				Content: HTMLToText(body), Published: normaliseDate(it.PubDate),
			})
		}
		return f, nil
	case "feed":
		var doc atomDoc
		if err := xml.Unmarshal(data, &doc); err != nil {
			return Feed{}, fmt.Errorf("parse Atom: %w", err)
		}
		f := Feed{Title: strings.TrimSpace(doc.Title), Items: []Item{}}
		for _, e := range doc.Entries {
			body := e.Content
			if strings.TrimSpace(body) == "" {
				body = e.Summary
			}
			link := ""
			for _, l := range e.Links {
				if l.Rel == "" || l.Rel == "alternate" {
					link = l.Href
					break
				}
			}
			date := e.Published
			if date == "" {
				date = e.Updated
			}
			f.Items = append(f.Items, Item{Title: clean(e.Title), Link: link, Content: HTMLToText(body), Published: normaliseDate(date)})
		}
		return f, nil
	default:
		return Feed{}, fmt.Errorf("parse feed: root element <%s> is neither <rss> nor <feed>", root)
	}
}

func rootElement(data []byte) (string, error) {
	dec := xml.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", fmt.Errorf("parse feed: no root element: %w", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			return se.Name.Local, nil
		}
	}
}

var (
	blockTagRe = regexp.MustCompile(`(?i)</?(p|br|div|li|ul|ol|h[1-6]|blockquote)[^>]*>`)
	dropRe     = regexp.MustCompile(`(?is)<(script|style)[^>]*>.*?</(script|style)>`)
	tagRe      = regexp.MustCompile(`(?s)<[^>]*>`)
)

// HTMLToText strips markup from a feed body: block tags become spaces, other
// tags vanish, entities are decoded and whitespace collapses.
func HTMLToText(s string) string {
	s = dropRe.ReplaceAllString(s, " ")
	s = blockTagRe.ReplaceAllString(s, " ")
	s = tagRe.ReplaceAllString(s, "")
	return clean(html.UnescapeString(s))
}

func clean(s string) string { return strings.Join(strings.Fields(s), " ") }

var dateLayouts = []string{time.RFC1123Z, time.RFC1123, time.RFC822Z, time.RFC822, time.RFC3339, "Mon, 2 Jan 2006 15:04:05 -0700", "Mon, 2 Jan 2006 15:04:05 MST"}

func normaliseDate(s string) string {
	s = strings.TrimSpace(s)
	for _, l := range dateLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC().Format(time.RFC3339)
		}
	}
	return s
}
