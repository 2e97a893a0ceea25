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

func TestFetch(t *testing.T) {
	box, err := parseMailbox(fixture)
	require.NoError(t, err)
	tests := []struct {
		id, wantSender string
		wantErr        string
	}{
		{id: "msg-001", wantSender: "user@corp.com"},
		{id: "MSG-002", wantSender: "li.wei@example.org"},
		{id: "3", wantSender: "m.rossi@example.net"},
		{id: "msg-999", wantErr: `"msg-999" not found`},
		{id: " ", wantErr: "email_id is required"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			m, err := fetch(box, tt.id)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantSender, m.Sender)
			require.NotEmpty(t, m.Body)
		})
	}
}

func TestRunWithWorkspaceMailbox(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "box.json"), []byte(`[{"id":"x1","sender":"a@b.c","subject":"s","body":"b"}]`), 0o644))
	var out bytes.Buffer
	code := toolkit.Run(t.Context(), tool, toolkit.IO{
		Stdin: strings.NewReader(`{"email_id":"x1","mailbox":"box.json"}`), Stdout: &out, Stderr: &bytes.Buffer{},
		Getenv: func(k string) string { return map[string]string{"AGENTFLOW_WORKSPACE": dir}[k] },
	}, handle)
	require.Equal(t, 0, code)
	var got output
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	require.Equal(t, output{EmailID: "x1", Sender: "a@b.c", Subject: "s", Body: "b"}, got)
}
