// Command md-generator renders a titled Markdown document into the workspace
// (the daily-news demo's renderer) and returns it, so the next step can post
// it and the checkpoint keeps the file.
package main

import (
	"context"
	_ "embed"
	"strings"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

//go:embed VERSION
var version string

var tool = toolkit.Tool{
	Name:    "md-generator",
	Version: version,
	Summary: "render a Markdown document and write it to /workspace/summary.md",
	Usage: `Input:  {"title": "...", "content": "markdown body", "path": "summary.md"}
Output: {"markdown", "path", "bytes"}`,
}

type input struct {
	Title   toolkit.Text `json:"title"`
	Content toolkit.Text `json:"content"`
	Path    string       `json:"path"`
}

func main() { toolkit.Main(tool, handle) }

func handle(_ context.Context, env toolkit.Env, in input) (any, error) {
	md, err := Render(string(in.Title), string(in.Content))
	if err != nil {
		return nil, err
	}
	path := in.Path
	if path == "" {
		path = "summary.md"
	}
	if path, err = toolkit.CleanRel(path); err != nil {
		return nil, err
	}
	root, err := env.OpenWorkspace()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if err := toolkit.WriteFile(root, path, []byte(md)); err != nil {
		return nil, err
	}
	env.Log.Info("markdown written", "path", path, "bytes", len(md))
	return map[string]any{"markdown": md, "path": path, "bytes": len(md)}, nil
}

// Render builds "# Title\n\ncontent\n": line endings normalised, trailing
// spaces trimmed, runs of blank lines collapsed, and a leading "# " heading
// in content dropped when it repeats the title.
func Render(title, content string) (string, error) {
	title = strings.Join(strings.Fields(title), " ")
	if title == "" {
		return "", toolkit.BadInput("title is required")
	}
	content = strings.ReplaceAll(strings.ReplaceAll(content, "\r\n", "\n"), "\r", "\n")
	var lines []string
	blank := false
	for _, l := range strings.Split(content, "\n") {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			if !blank && len(lines) > 0 {
				lines = append(lines, "")
			}
			blank = true
			continue
		}
		blank = false
		lines = append(lines, l)
	}
	if len(lines) > 0 && strings.TrimSpace(strings.TrimPrefix(lines[0], "# ")) == title && strings.HasPrefix(lines[0], "# ") {
		lines = lines[1:]
		for len(lines) > 0 && lines[0] == "" {
			lines = lines[1:]
		}
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var b strings.Builder
	b.WriteString("# " + title + "\n")
	if len(lines) > 0 {
		b.WriteString("\n" + strings.Join(lines, "\n") + "\n")
	}
	return b.String(), nil
}
