// Package graph renders a compiled Plan's DAG for humans (agentctl graph).
// Output is deterministic: nodes in spec order, edges in DependsOn order.
package graph

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/spec"
)

// Formats lists the supported output formats.
var Formats = []string{"mermaid", "dot"}

// UnknownFormatError is returned for a format not in Formats.
type UnknownFormatError struct{ Format string }

func (e *UnknownFormatError) Error() string {
	return fmt.Sprintf("unknown graph format %q (want %s)", e.Format, strings.Join(Formats, " or "))
}

// Render draws the plan as a Mermaid flowchart or a Graphviz digraph.
// Edges point from a dependency to the step that waits for it (execution
// order); implicit dependencies (found in expressions) are dashed; approval
// steps have their own shape and conditional steps say "if".
func Render(p *spec.Plan, format string) (string, error) {
	if p == nil {
		return "", fmt.Errorf("render graph: nil plan")
	}
	switch format {
	case "mermaid":
		return mermaid(p), nil
	case "dot":
		return dot(p), nil
	}
	return "", &UnknownFormatError{Format: format}
}

type edge struct {
	from, to string
	implicit bool
}

func edges(p *spec.Plan) []edge {
	var out []edge
	for _, s := range p.Steps {
		for _, d := range s.DependsOn {
			out = append(out, edge{from: d, to: s.ID, implicit: !slices.Contains(s.ExplicitDependsOn, d)})
		}
	}
	return out
}

// label is the node text: id, then what runs, then a condition marker,
// then what the step may reach (hosts and header names, never values).
func label(s spec.PlanStep) []string {
	lines := []string{s.ID}
	switch {
	case s.Approval != nil:
		lines = append(lines, "approval")
	case s.Tool != "":
		lines = append(lines, s.Tool)
	case s.Image != "":
		img := s.Image
		if i := strings.Index(img, "sha256:"); i >= 0 && len(img) >= i+7+12 {
			img = img[:i+7+12] // a digest prefix is enough to recognise it
		}
		lines = append(lines, img)
	}
	if s.If != "" {
		lines = append(lines, "if: "+s.If)
	}
	if len(s.Egress) > 0 {
		rules := make([]string, len(s.Egress))
		for i, r := range s.Egress {
			rules[i] = r.String()
		}
		lines = append(lines, "egress: "+strings.Join(rules, ", "))
	}
	return lines
}

func mermaid(p *spec.Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "---\ntitle: %s %s\n---\nflowchart TD\n", mermaidText(p.Name), mermaidText(p.Version))
	for _, s := range p.Steps {
		text := make([]string, 0, 3)
		for _, l := range label(s) {
			text = append(text, mermaidText(l))
		}
		t := `"` + strings.Join(text, "<br/>") + `"`
		if s.Approval != nil {
			fmt.Fprintf(&b, "  %s{{%s}}\n", mermaidID(s.ID), t) // hexagon
		} else {
			fmt.Fprintf(&b, "  %s[%s]\n", mermaidID(s.ID), t)
		}
	}
	for _, e := range edges(p) {
		arrow := "-->"
		if e.implicit {
			arrow = "-.->"
		}
		fmt.Fprintf(&b, "  %s %s %s\n", mermaidID(e.from), arrow, mermaidID(e.to))
	}
	return b.String()
}

// mermaidID prefixes node IDs: a step named "end" (a Mermaid keyword) or
// starting with o/x (edge markers) would otherwise break the chart.
func mermaidID(id string) string { return "s_" + id }

// mermaidText escapes text for a quoted Mermaid label: quotes and the
// characters Mermaid would read as markup become entity codes.
func mermaidText(s string) string {
	r := strings.NewReplacer(`"`, "#quot;", "<", "#lt;", ">", "#gt;", "\n", " ", "#", "#35;")
	return r.Replace(s)
}

func dot(p *spec.Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n", dotQuote(p.Name))
	fmt.Fprintf(&b, "  label=%s;\n  rankdir=TB;\n  node [shape=box, style=rounded];\n", dotQuote(p.Name+" "+p.Version))
	for _, s := range p.Steps {
		attrs := "label=" + dotQuote(strings.Join(label(s), "\n"))
		if s.Approval != nil {
			attrs += ", shape=hexagon, style=\"\""
		}
		fmt.Fprintf(&b, "  %s [%s];\n", dotQuote(s.ID), attrs)
	}
	for _, e := range edges(p) {
		style := ""
		if e.implicit {
			style = " [style=dashed]"
		}
		fmt.Fprintf(&b, "  %s -> %s%s;\n", dotQuote(e.from), dotQuote(e.to), style)
	}
	b.WriteString("}\n")
	return b.String()
}

// dotQuote makes a DOT quoted string; \n stays a DOT line break.
func dotQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")
	return `"` + r.Replace(s) + `"`
}
