package spec

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
)

func TestCompileEgress(t *testing.T) {
	src := `
name: t
version: "1.0.0"
secrets:
  - {name: tok, source: "env://TOK"}
  - {name: other, source: "env://OTHER"}
defaults:
  egress: ["feeds.example.com:443"]
steps:
  - id: inherits
    tool: x:1
  - id: own
    tool: x:1
    egress:
      - "*.example.org:443"
      - host: "api.example.com:443"
        headers: {Authorization: "Bearer {{ .secrets.tok }}", X-Plain: "v1"}
    resources: {max_egress: 1Mi}
  - id: optout
    tool: x:1
    egress: []
  - id: gate
    approval: {prompt: "go?"}
`
	p, err := Load("egress.yaml", []byte(src))
	require.NoError(t, err)
	inherits, _ := p.Step("inherits")
	require.Equal(t, []EgressRule{{Host: "feeds.example.com", Port: 443}}, inherits.Egress)
	require.Equal(t, int64(exechost.DefaultEgressBytes), inherits.Resources.MaxEgressBytes)

	own, _ := p.Step("own")
	require.Equal(t, []EgressRule{{Host: "*.example.org", Port: 443},
		{Host: "api.example.com", Port: 443, Headers: map[string]string{"Authorization": "Bearer {{ .secrets.tok }}", "X-Plain": "v1"}}}, own.Egress)
	require.Equal(t, int64(1<<20), own.Resources.MaxEgressBytes)
	require.Equal(t, []string{"tok"}, own.Secrets, "the worker resolves the secrets the headers reference, and only those")

	optout, _ := p.Step("optout")
	require.Empty(t, optout.Egress)
	require.Zero(t, optout.Resources.MaxEgressBytes)
	gate, _ := p.Step("gate")
	require.Empty(t, gate.Egress)

	// A spec without egress compiles exactly as before: no egress, no
	// max_egress in the Plan.
	p2, err := Load("none.yaml", []byte("name: t\nversion: \"1.0.0\"\nsteps:\n  - id: a\n    tool: x:1\n"))
	require.NoError(t, err)
	require.Empty(t, p2.Steps[0].Egress)
	require.Zero(t, p2.Steps[0].Resources.MaxEgressBytes)
}
