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

func TestRender(t *testing.T) {
	tests := []struct {
		name, title, content, want, wantErr string
	}{
		{name: "seed", title: "Daily Tech News Summary - 2024-06-15", content: "- [A]: x\n- [B]: y", want: "# Daily Tech News Summary - 2024-06-15\n\n- [A]: x\n- [B]: y\n"},
		{name: "crlf and blank runs", title: " T ", content: "a  \r\n\r\n\r\n\r\nb\r\n\r\n", want: "# T\n\na\n\nb\n"},
		{name: "repeated heading dropped", title: "T", content: "# T\n\nbody", want: "# T\n\nbody\n"},
		{name: "empty content", title: "T", content: "", want: "# T\n"},
		{name: "no title", title: "  ", wantErr: "title is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Render(tt.title, tt.content)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestHandle(t *testing.T) {
	tests := []struct {
		name, stdin, wantPath, wantErr string
		wantCode                       int
	}{
		{name: "default path", stdin: `{"title":"T","content":"c"}`, wantPath: "summary.md"},
		{name: "nested path", stdin: `{"title":"T","content":"c","path":"out/daily.md"}`, wantPath: "out/daily.md"},
		{name: "escape refused", stdin: `{"title":"T","content":"c","path":"../x.md"}`, wantCode: 2, wantErr: "escapes /workspace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var out bytes.Buffer
			code := toolkit.Run(t.Context(), tool, toolkit.IO{Stdin: strings.NewReader(tt.stdin), Stdout: &out, Stderr: &bytes.Buffer{},
				Getenv: func(k string) string { return map[string]string{"AGENTFLOW_WORKSPACE": dir}[k] }}, handle)
			require.Equal(t, tt.wantCode, code, out.String())
			var got map[string]any
			require.NoError(t, json.Unmarshal(out.Bytes(), &got))
			if tt.wantErr != "" {
				require.Contains(t, got["error"], tt.wantErr)
				return
			}
			require.Equal(t, tt.wantPath, got["path"])
			data, err := os.ReadFile(filepath.Join(dir, tt.wantPath))
			require.NoError(t, err)
			require.Equal(t, "# T\n\nc\n", string(data))
			require.Equal(t, string(data), got["markdown"])
		})
	}
}
