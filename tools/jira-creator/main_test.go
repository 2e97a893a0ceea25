package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
	"github.com/stretchr/testify/require"
)

func TestNewTicket(t *testing.T) {
	now := time.Date(2024, 6, 15, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		in       input
		wantProj string
		wantPrio string
		wantErr  string
	}{
		{name: "defaults", in: input{Summary: "Billing dispute requires review: C-0042"}, wantProj: "SUP", wantPrio: "High"},
		{name: "explicit", in: input{Summary: "x", Project: "fin", Priority: "low"}, wantProj: "FIN", wantPrio: "Low"},
		{name: "no summary", in: input{Summary: "  "}, wantErr: "summary is required"},
		{name: "bad project", in: input{Summary: "x", Project: "a-b"}, wantErr: "not a Jira project key"},
		{name: "bad priority", in: input{Summary: "x", Priority: "urgent!"}, wantErr: "priority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewTicket(tt.in, now)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantProj, got.Project)
			require.Equal(t, tt.wantPrio, got.Priority)
			require.Equal(t, "2024-06-15T08:00:00Z", got.Created)
		})
	}
}

func TestHandleWritesNumberedTickets(t *testing.T) {
	dir := t.TempDir()
	runOnce := func() map[string]any {
		var out bytes.Buffer
		code := toolkit.Run(t.Context(), tool, toolkit.IO{
			Stdin:  strings.NewReader(`{"summary":"Billing dispute requires review: C-0042","description":"body"}`),
			Stdout: &out, Stderr: &bytes.Buffer{},
			Getenv: func(k string) string {
				return map[string]string{"AGENTFLOW_WORKSPACE": dir, "AGENTFLOW_STEP_ID": "escalate"}[k]
			},
		}, handle)
		require.Equal(t, 0, code, out.String())
		var got map[string]any
		require.NoError(t, json.Unmarshal(out.Bytes(), &got))
		return got
	}
	first, second := runOnce(), runOnce()
	require.Equal(t, "SUP-1", first["ticket_id"])
	require.Equal(t, "SUP-2", second["ticket_id"])
	data, err := os.ReadFile(filepath.Join(dir, "tickets", "SUP-1.json"))
	require.NoError(t, err)
	var tk Ticket
	require.NoError(t, json.Unmarshal(data, &tk))
	require.Equal(t, "body", tk.Description)
	require.Equal(t, "escalate", tk.StepID)
}
