package graph

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/spec"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestGoldenSeeds renders both seed specs and their live variants (egress
// shown with header names, never values) in both formats against golden
// files.
func TestGoldenSeeds(t *testing.T) {
	for _, name := range []string{"complaint-handler", "daily-tech-news", "complaint-handler.live", "daily-tech-news.live"} {
		p, err := spec.LoadFile(filepath.Join("../../specs", name+".yaml"))
		require.NoError(t, err)
		for _, format := range Formats {
			t.Run(name+"."+format, func(t *testing.T) {
				got, err := Render(p, format)
				require.NoError(t, err)
				golden := filepath.Join("testdata", name+"."+format)
				if *update {
					require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
				}
				want, err := os.ReadFile(golden)
				require.NoError(t, err)
				require.Equal(t, string(want), got)
				again, _ := Render(p, format)
				require.Equal(t, got, again, "output must be deterministic")
			})
		}
	}
}

func TestRender(t *testing.T) {
	p := &spec.Plan{
		Name: "demo", Version: "1.0.0",
		Steps: []spec.PlanStep{
			{ID: "build", Image: "reg/x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
			{ID: "review", Approval: &spec.Approval{Prompt: "ok?", Timeout: time.Hour}, DependsOn: []string{"build"}, ExplicitDependsOn: []string{"build"}},
			{ID: "ship", Tool: "deploy:1", If: `{{ .steps.review.status == "success" }}`, DependsOn: []string{"review", "build"}, ExplicitDependsOn: []string{"review"}},
		},
	}
	tests := []struct {
		format string
		want   string
	}{
		{format: "mermaid", want: `---
title: demo 1.0.0
---
flowchart TD
  s_build["build<br/>reg/x@sha256:0123456789ab"]
  s_review{{"review<br/>approval"}}
  s_ship["ship<br/>deploy:1<br/>if: {{ .steps.review.status == #quot;success#quot; }}"]
  s_build --> s_review
  s_review --> s_ship
  s_build -.-> s_ship
`},
		{format: "dot", want: `digraph "demo" {
  label="demo 1.0.0";
  rankdir=TB;
  node [shape=box, style=rounded];
  "build" [label="build\nreg/x@sha256:0123456789ab"];
  "review" [label="review\napproval", shape=hexagon, style=""];
  "ship" [label="ship\ndeploy:1\nif: {{ .steps.review.status == \"success\" }}"];
  "build" -> "review";
  "review" -> "ship";
  "build" -> "ship" [style=dashed];
}
`},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			got, err := Render(p, tt.format)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestRenderErrors(t *testing.T) {
	_, err := Render(&spec.Plan{}, "svg")
	var ufe *UnknownFormatError
	require.ErrorAs(t, err, &ufe)
	require.Equal(t, "svg", ufe.Format)
	_, err = Render(nil, "dot")
	require.Error(t, err)
}
