//go:build e2e

package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/agentflow/agentflow/workflows"
)

// preflightSpec has one image step; %s is its image, and %s a secrets
// block with the step's input referencing api_token when not empty.
const preflightSpec = `name: preflight-e2e
version: "1.0.0"
%s
steps:
  - id: fetch
    image: "%s"
    inputs: {mode: ok%s}
`

const missingEchoImage = "agentflow/echo@sha256:0000000000000000000000000000000000000000000000000000000000000000"

// TestRunDryRunPreflight: run --dry-run asks the worker of the queue, which
// checks images on its Docker daemon and secrets under its own policy; a
// failed check exits 2 naming what failed, no worker exits 1 and leaves no
// preflight running.
func TestRunDryRunPreflight(t *testing.T) {
	e := startCLIEnv(t)
	present := e.images["echo"]
	require.NotEmpty(t, present)
	const secretValue = "preflight-e2e-V4lue-never-printed"
	// The value exists where the worker runs (this process), but the
	// worker's policy allows no env:// source.
	t.Setenv("AF_PREFLIGHT_E2E_TOKEN", secretValue)
	secretBlock := "secrets:\n  - {name: api_token, source: env://AF_PREFLIGHT_E2E_TOKEN}"
	secretInput := `, token: "{{ .secrets.api_token }}"`

	tests := []struct {
		name      string
		realHost  bool // needs the Docker host (the fake checks no image)
		spec      string
		args      []string
		wantCode  int
		wantOut   []string
		wantErr   string
		noLinger  string // task queue whose preflights must all be closed
		forbidden string
	}{
		{name: "everything present", spec: fmt.Sprintf(preflightSpec, "", present, ""),
			wantCode: 0, wantOut: []string{"preflight on worker", "step fetch  " + present}},
		{name: "missing image digest", realHost: true, spec: fmt.Sprintf(preflightSpec, "", missingEchoImage, ""),
			wantCode: 2, wantOut: []string{"FAIL image  step fetch  " + missingEchoImage + ": image " + missingEchoImage + " is not on worker"},
			wantErr: "checks failed on worker"},
		{name: "secret the worker may not resolve", spec: fmt.Sprintf(preflightSpec, secretBlock, present, secretInput),
			wantCode: 2, wantOut: []string{"FAIL secret step fetch  api_token (env): refused by this worker's secret policy"},
			forbidden: secretValue},
		{name: "no worker on the queue", spec: fmt.Sprintf(preflightSpec, "", present, ""),
			args:     []string{"--task-queue", "preflight-nobody", "--preflight-timeout", "5s"},
			wantCode: 1, wantErr: "no worker answered on task queue preflight-nobody within 5s", noLinger: "preflight-nobody"},
		{name: "offline asks no worker", spec: fmt.Sprintf(preflightSpec, secretBlock, present, secretInput),
			args:     []string{"--task-queue", "preflight-nobody-offline", "--offline"},
			wantCode: 0, wantOut: []string{"api_token (env://AF_PREFLIGHT_E2E_TOKEN): ok, set in this environment"}, forbidden: secretValue},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.realHost && !e.real {
				t.Skip("the fake sandbox host checks no image")
			}
			args := append([]string{"run", "-f", e.writeSpec(t, fmt.Sprintf("preflight-%d", i), tc.spec), "--dry-run"}, tc.args...)
			code, out, errOut := e.agentctl(t, args...)
			require.Equal(t, tc.wantCode, code, "stdout: %s\nstderr: %s", out, errOut)
			if tc.wantCode != 1 {
				require.Contains(t, out, "STEP", "the table comes first")
			}
			for _, w := range tc.wantOut {
				require.Contains(t, out, w)
			}
			if tc.wantErr != "" {
				require.Contains(t, errOut, tc.wantErr)
			}
			if tc.forbidden != "" {
				require.NotContains(t, out+errOut, tc.forbidden)
			}
			if tc.noLinger != "" {
				requireNoOpenPreflight(t, e, tc.noLinger)
			}
		})
	}
}

// requireNoOpenPreflight: every preflight started on queue is closed (the
// CLI terminated it); visibility may lag the terminate a little.
func requireNoOpenPreflight(t *testing.T, e *cliEnv, queue string) {
	t.Helper()
	query := fmt.Sprintf("WorkflowType = '%s' AND TaskQueue = '%s'", workflows.PreflightWorkflowName, queue)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		resp, err := e.client.ListWorkflow(t.Context(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if !assert.NoError(c, err) {
			return
		}
		if !assert.NotEmpty(c, resp.Executions, "the preflight was started") {
			return
		}
		for _, ex := range resp.Executions {
			assert.Equal(c, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, ex.Status, "%s", ex.Execution.GetWorkflowId())
			assert.True(c, strings.HasPrefix(ex.Execution.GetWorkflowId(), "preflight-preflight-e2e-"), ex.Execution.GetWorkflowId())
		}
	}, 30*time.Second, 200*time.Millisecond)
}
