//go:build integration

package engine

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/logstore"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/testenv"
)

// TestLogsFromS3: agentctl logs --store s3://… reads what a worker wrote
// to the shared bucket (endpoint and credentials from the AWS_* variables).
func TestLogsFromS3(t *testing.T) {
	m := testenv.MinIO(t)
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	url := m.StoreURL("prod")
	root, err := objstore.Open(t.Context(), url, m.Getenv)
	require.NoError(t, err)
	w, err := logstore.OnRoot(root, logstore.Options{}).Open(t.Context(), key(1))
	require.NoError(t, err)
	_, _ = io.WriteString(w, "written by a worker elsewhere\n")
	require.NoError(t, w.Close(t.Context(), logstore.Trailer{Outcome: "success"}))

	var out, errb bytes.Buffer
	code := Run(t.Context(), "test", []string{"logs", "ag", "--step", "s", "--store", url, "-o", "json"},
		Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	require.Equal(t, 0, code, errb.String())
	require.JSONEq(t, `[{"run_id":"run-1","step":"s","attempt":1,"log":"written by a worker elsewhere\n","finished":true}]`, out.String())

	// An unreachable store is a clear failure naming it.
	m.Stop()
	out.Reset()
	errb.Reset()
	code = Run(t.Context(), "test", []string{"logs", "ag", "--step", "s", "--store", url}, Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errb.String(), "unavailable")
}
