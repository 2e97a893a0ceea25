package spec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecodeFeatures(t *testing.T) {
	src := `name: t
version: "1.0.0-rc.1+build.5"
defaults:
  resources: &res {cpu: 500m, memory: 1Gi}
  retries: 3
steps:
  - id: a
    tool: x:1
    resources:
      <<: *res
      memory: 2Gi
    env: {PORT: 8080, DEBUG: true, API_KEY: "{{ .secrets.k }}"}
    inputs:
      n: 1.5
      nested: {list: [1, "two", null, true], obj: {}}
      big: 9007199254740992
  - id: review
    approval: {prompt: "ok?"}
    depends_on: [a]
    continue_on_error: true
secrets: [{name: k, source: "env://K"}]
description: ~
`
	p, err := Load("t.yaml", []byte(src))
	require.NoError(t, err)
	a := p.Steps[0]
	require.Equal(t, int64(500_000_000), a.Resources.NanoCPUs)
	require.Equal(t, int64(2<<30), a.Resources.MemoryBytes, "explicit keys win over merged ones")
	require.Equal(t, 3, a.Retries)
	require.Equal(t, map[string]string{"PORT": "8080", "DEBUG": "true", "API_KEY": "{{ .secrets.k }}"}, a.Env)
	require.Equal(t, []string{"k"}, a.Secrets)
	require.Equal(t, map[string]any{"list": []any{float64(1), "two", nil, true}, "obj": map[string]any{}}, a.Inputs["nested"])
	require.Equal(t, 1.5, a.Inputs["n"])
	require.Equal(t, float64(1<<53), a.Inputs["big"])

	r := p.Steps[1]
	require.Equal(t, &Approval{Prompt: "ok?", Timeout: DefaultApprovalTimeout}, r.Approval)
	require.Zero(t, r.Timeout)
	require.Zero(t, r.Resources)
	require.True(t, r.ContinueOnError)
	require.Equal(t, []string{"a"}, r.DependsOn)
}

func TestDecodeRefusesHugeInteger(t *testing.T) {
	_, err := Load("t.yaml", []byte("name: t\nversion: \"1.0.0\"\nsteps: [{id: a, tool: 'x:1', inputs: {id: 12345678901234567890}}]\n"))
	require.ErrorContains(t, err, "t.yaml:3:43: steps[0].inputs.id: integer 12345678901234567890 does not fit a JSON number exactly; quote it")
}

func TestParseReturnsSpecWithFieldErrors(t *testing.T) {
	s, err := Parse("t.yaml", []byte("name: t\nversion: \"1.0.0\"\nsteps: [{id: a, tool: 'x:1', colour: red}]\n"))
	require.NotNil(t, s, "field-level problems still yield a Spec for Validate")
	require.ErrorContains(t, err, `unknown field "colour" in step`)
	require.ErrorContains(t, Validate(s), `unknown field "colour" in step`)
}

// Implicit dependencies follow source order: inputs (as written), if, env;
// explicit depends_on come first and are not repeated.
func TestImplicitDependencyOrder(t *testing.T) {
	src := `name: t
version: "1.0.0"
steps:
  - {id: s1, tool: "x:1"}
  - {id: s2, tool: "x:1"}
  - {id: s3, tool: "x:1"}
  - {id: s4, tool: "x:1"}
  - id: last
    tool: x:1
    depends_on: [s3]
    inputs:
      z: "{{ .steps.s2.output.v }}"
      a: ["{{ .steps.s4.status }}", {deep: "x {{ .steps.s3.output.q }} y"}]
    if: "{{ .steps.s1.status == 'success' and .steps.s4.status == 'success' }}"
`
	p, err := Load("t.yaml", []byte(src))
	require.NoError(t, err)
	last, _ := p.Step("last")
	require.Equal(t, []string{"s3", "s2", "s4", "s1"}, last.DependsOn)
	require.Equal(t, []string{"s3"}, last.ExplicitDependsOn)
}

// Expression problems are reported at the character inside the YAML
// scalar, whatever its style.
func TestExpressionErrorPositions(t *testing.T) {
	tests := []struct {
		name, value string
		line, col   int
	}{
		{name: "plain", value: "x {{ .inputs.nope }}", line: 6, col: 15},
		{name: "double quoted", value: `"x {{ .inputs.nope }}"`, line: 6, col: 16},
		{name: "double quoted with escapes", value: `"\"\t {{ .inputs.nope }}"`, line: 6, col: 19},
		{name: "single quoted with ''", value: `'it''s {{ .inputs.nope }}'`, line: 6, col: 20},
		{name: "literal block", value: "|\n        line one\n        two {{ .inputs.nope }}\n", line: 8, col: 16},
		{name: "multi-line double quoted", value: "\"first\n        second {{ .inputs.nope }}\"", line: 7, col: 19},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "name: t\nversion: \"1.0.0\"\nsteps:\n  - id: a\n    inputs:\n      v: " + tt.value + "\n    tool: x:1\n"
			_, err := Load("t.yaml", []byte(src))
			var list ErrorList
			require.ErrorAs(t, err, &list, src)
			require.Len(t, list, 1)
			require.Contains(t, list[0].Msg, `unknown input "nope"`)
			require.Equal(t, [2]int{tt.line, tt.col}, [2]int{list[0].Line, list[0].Col}, src)
		})
	}
}

func TestErrorsAreCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: t\nversion: \"1.0.0\"\nsteps:\n")
	for i := range 300 {
		fmt.Fprintf(&b, "  - {id: s%d, tool: \"x:1\", inputs: {v: \"{{ .steps.nope%d.output }}\"}, colour: red}\n", i, i)
	}
	_, err := Load("t.yaml", []byte(b.String()))
	var list ErrorList
	require.ErrorAs(t, err, &list)
	require.Len(t, list, MaxErrors+1)
	require.Contains(t, list[MaxErrors].Msg, "too many problems")
}
