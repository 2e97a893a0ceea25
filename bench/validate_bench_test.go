package bench

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/agentflow/agentflow/internal/spec"
)

// BenchmarkLoadSeed measures parse -> validate -> compile of each seed spec
// in process (what `agentctl validate` spends after start-up).
func BenchmarkLoadSeed(b *testing.B) {
	for _, name := range []string{"complaint-handler", "daily-tech-news"} {
		data, err := os.ReadFile("../specs/" + name + ".yaml")
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := spec.Load(name+".yaml", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoad500 loads a generated 500-step spec: each step depends on
// its predecessor explicitly and on two earlier steps through expressions
// in inputs, if and env.
func BenchmarkLoad500(b *testing.B) {
	data := generate(500)
	if _, err := spec.Load("gen.yaml", data); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := spec.Load("gen.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}

func generate(n int) []byte {
	var s strings.Builder
	s.WriteString("name: generated\nversion: \"1.0.0\"\ninputs:\n  - {name: seed, type: string, required: true}\n")
	s.WriteString("secrets:\n  - {name: api_token, source: env://API_TOKEN}\n")
	s.WriteString("defaults: {timeout: 60s, retries: 2, resources: {cpu: \"1\", memory: 512Mi}}\nsteps:\n")
	for i := range n {
		fmt.Fprintf(&s, "  - id: step_%d\n    tool: worker:1.%d\n", i, i%7)
		if i == 0 {
			s.WriteString("    inputs: {seed: \"{{ .inputs.seed }}\"}\n")
			continue
		}
		fmt.Fprintf(&s, "    depends_on: [step_%d]\n", i-1)
		fmt.Fprintf(&s, "    inputs:\n      text: \"{{ .steps.step_%d.output.text | lower | replace('a', 'b') }}\"\n", i/2)
		fmt.Fprintf(&s, "      items: [\"{{ .steps.step_%d.output.items | map('name') | join(', ') }}\", 3, true]\n", i/3)
		fmt.Fprintf(&s, "    if: \"{{ .steps.step_%d.status == 'success' }}\"\n", i-1)
		fmt.Fprintf(&s, "    env: {LOG_LEVEL: debug, API_TOKEN: \"{{ .secrets.api_token }}\"}\n")
		if i%10 == 0 {
			s.WriteString("    resources: {cpu: 500m, memory: 1Gi, pids: 128}\n    timeout: 5m\n")
		}
	}
	s.WriteString("outputs:\n")
	fmt.Fprintf(&s, "  - {name: last, value: \"{{ .steps.step_%d.output.text }}\"}\n", n-1)
	return []byte(s.String())
}
