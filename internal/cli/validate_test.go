package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runCLI runs agentctl in-process and returns exit code, stdout, stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(t.Context(), "test", args, Streams{In: strings.NewReader(""), Out: &out, Err: &errb}, nil)
	return code, out.String(), errb.String()
}

func writeSpec(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "spec.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestValidateExitCodesAndMessages(t *testing.T) {
	bad := writeSpec(t, "name: x\nversion: \"1.0.0\"\nsteps:\n  - id: a\n    tool: t:1\n    tiemout: 5s\n")
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "seed complaint handler", args: []string{"validate", "-f", "../../specs/complaint-handler.yaml"}, wantCode: 0, wantStdout: "valid (complaint-handler-v2 2.3.1, 5 steps)"},
		{name: "seed daily news", args: []string{"validate", "-f", "../../specs/daily-tech-news.yaml"}, wantCode: 0, wantStdout: "valid (daily-tech-news 1.0.0, 4 steps)"},
		{name: "positional file", args: []string{"validate", "../../specs/demo.yaml"}, wantCode: 0, wantStdout: "valid (demo-news-digest"},
		{name: "invalid spec", args: []string{"validate", "-f", bad}, wantCode: 2, wantStderr: bad + ":6:5: "},
		{name: "missing file", args: []string{"validate", "-f", "/nonexistent.yaml"}, wantCode: 2, wantStderr: "nonexistent.yaml"},
		{name: "no file", args: []string{"validate"}, wantCode: 2, wantStderr: "no spec given"},
		{name: "unknown flag", args: []string{"validate", "--nope"}, wantCode: 2, wantStderr: "unknown flag"},
		{name: "bad output format", args: []string{"validate", "-o", "xml", "-f", bad}, wantCode: 2, wantStderr: "invalid --output"},
		{name: "unknown verb", args: []string{"frobnicate"}, wantCode: 2, wantStderr: `unknown command "frobnicate"`},
		{name: "graph mermaid", args: []string{"graph", "-f", "../../specs/daily-tech-news.yaml"}, wantCode: 0, wantStdout: "flowchart"},
		{name: "graph dot", args: []string{"graph", "-f", "../../specs/daily-tech-news.yaml", "--format", "dot"}, wantCode: 0, wantStdout: "digraph"},
		{name: "graph bad format", args: []string{"graph", "-f", "../../specs/daily-tech-news.yaml", "--format", "png"}, wantCode: 2, wantStderr: "invalid --format"},
		{name: "graph invalid spec", args: []string{"graph", "-f", bad}, wantCode: 2, wantStderr: ":6:5: "},
		{name: "version", args: []string{"--version"}, wantCode: 0, wantStdout: "test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.args...)
			require.Equal(t, tt.wantCode, code, "stdout=%s stderr=%s", stdout, stderr)
			require.Contains(t, stdout, tt.wantStdout)
			require.Contains(t, stderr, tt.wantStderr)
		})
	}
}

func TestValidateJSONReportsEveryProblem(t *testing.T) {
	p := writeSpec(t, "name: Bad_Name\nversion: \"1.0\"\nsteps:\n  - id: a\n    tool: t:1\n    depends_on: [a]\n")
	code, stdout, _ := runCLI(t, "validate", "-o", "json", "-f", p)
	require.Equal(t, ExitInvalid, code)
	var reports []validationReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &reports))
	require.Len(t, reports, 1)
	require.False(t, reports[0].Valid)
	var lines []int
	for _, e := range reports[0].Errors {
		lines = append(lines, e.Line)
	}
	require.Subset(t, lines, []int{1, 2, 6}, "name, version and the self-dependency are all reported: %+v", reports[0].Errors)
}
