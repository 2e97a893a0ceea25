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

func TestEcho(t *testing.T) {
	tests := []struct {
		name      string
		stdin     string
		wantCode  int
		wantFiles []any
		wantWrite string
		wantErr   string
	}{
		{name: "plain", stdin: `{"a":1,"b":{"c":[true,null]}}`, wantFiles: []any{"pre.txt"}},
		{name: "write default", stdin: `{"a":1,"write_input":true}`, wantFiles: []any{"input.json", "pre.txt"}, wantWrite: "input.json"},
		{name: "write path", stdin: `{"a":1,"write_input":"steps/x/input.json"}`, wantFiles: []any{"pre.txt", "steps/x/input.json"}, wantWrite: "steps/x/input.json"},
		{name: "write escape", stdin: `{"write_input":"../x"}`, wantCode: 2, wantErr: "escapes"},
		{name: "write bad type", stdin: `{"write_input":3}`, wantCode: 2, wantErr: "boolean or a workspace path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "pre.txt"), nil, 0o644))
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
			var in map[string]any
			require.NoError(t, json.Unmarshal([]byte(tt.stdin), &in))
			for k, v := range in {
				require.Equal(t, v, got[k])
			}
			require.Equal(t, tt.wantFiles, got["workspace_files"])
			if tt.wantWrite != "" {
				data, err := os.ReadFile(filepath.Join(dir, tt.wantWrite))
				require.NoError(t, err)
				require.JSONEq(t, tt.stdin, string(data))
			}
		})
	}
}
