package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
	"github.com/stretchr/testify/require"
)

func TestWSFileHandOff(t *testing.T) {
	dir := t.TempDir()
	run := func(stdin string) (int, map[string]any) {
		var out bytes.Buffer
		code := toolkit.Run(t.Context(), tool, toolkit.IO{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &bytes.Buffer{},
			Getenv: func(k string) string { return map[string]string{"AGENTFLOW_WORKSPACE": dir}[k] }}, handle)
		var got map[string]any
		require.NoError(t, json.Unmarshal(out.Bytes(), &got), out.String())
		return code, got
	}
	// Steps share one directory here, standing in for checkpoint/restore.
	steps := []struct {
		name     string
		stdin    string
		wantCode int
		want     map[string]any
		wantErr  string
	}{
		{name: "left branch", stdin: `{"write":{"left.txt":"L"}}`, want: map[string]any{"written": []any{"left.txt"}, "files": map[string]any{}, "missing": []any{}, "workspace_files": []any{"left.txt"}}},
		{name: "right branch", stdin: `{"write":{"/workspace/right/r.txt":"R"}}`, want: map[string]any{"written": []any{"right/r.txt"}, "files": map[string]any{}, "missing": []any{}, "workspace_files": []any{"left.txt", "right/r.txt"}}},
		{name: "join reads both", stdin: `{"read":["left.txt","right/r.txt","nope.txt"]}`, want: map[string]any{"written": []any{}, "files": map[string]any{"left.txt": "L", "right/r.txt": "R"}, "missing": []any{"nope.txt"}, "workspace_files": []any{"left.txt", "right/r.txt"}}},
		{name: "append creates", stdin: `{"append":{"log.txt":"one\n"}}`, want: map[string]any{"written": []any{"log.txt"}, "files": map[string]any{}, "missing": []any{}, "workspace_files": []any{"left.txt", "log.txt", "right/r.txt"}}},
		{name: "append after write, read sees both", stdin: `{"write":{"w.txt":"a"},"append":{"w.txt":"b","log.txt":"two\n"},"read":["log.txt","w.txt"]}`, want: map[string]any{"written": []any{"w.txt", "log.txt", "w.txt"}, "files": map[string]any{"log.txt": "one\ntwo\n", "w.txt": "ab"}, "missing": []any{}, "workspace_files": []any{"left.txt", "log.txt", "right/r.txt", "w.txt"}}},
		{name: "append escape", stdin: `{"append":{"../x":"x"}}`, wantCode: 2, wantErr: "escapes /workspace"},
		{name: "strict missing", stdin: `{"read":["nope.txt"],"strict":true}`, wantCode: 1, wantErr: "nope.txt"},
		{name: "escape", stdin: `{"write":{"../../etc/x":"x"}}`, wantCode: 2, wantErr: "escapes /workspace"},
	}
	for _, st := range steps {
		code, got := run(st.stdin)
		require.Equal(t, st.wantCode, code, st.name)
		if st.wantErr != "" {
			require.Contains(t, got["error"], st.wantErr, st.name)
			continue
		}
		require.Equal(t, st.want, got, st.name)
	}
}
