package registry

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentflow/agentflow/exechost"
)

// scriptHost answers --version and --help with canned results and records
// what the probe did to it.
type scriptHost struct {
	version, help *exechost.ExecResult
	provisionErr  error
	execErr       error
	provisioned   []exechost.ProvisionRequest
	terminated    []exechost.ExecutionID
	commands      [][]string
}

func (h *scriptHost) Provision(_ context.Context, req exechost.ProvisionRequest) (*exechost.Execution, error) {
	h.provisioned = append(h.provisioned, req)
	if h.provisionErr != nil {
		return nil, h.provisionErr
	}
	return &exechost.Execution{ExecutionID: req.ExecutionID, ImageDigest: "sha256:img"}, nil
}

func (h *scriptHost) Exec(_ context.Context, _ exechost.ExecutionID, req exechost.ExecRequest) (*exechost.ExecResult, error) {
	h.commands = append(h.commands, req.Command)
	if h.execErr != nil {
		return &exechost.ExecResult{}, h.execErr
	}
	if req.Command[len(req.Command)-1] == "--version" {
		return h.version, nil
	}
	return h.help, nil
}

func (h *scriptHost) Checkpoint(context.Context, exechost.ExecutionID, exechost.CheckpointRequest) (*exechost.Checkpoint, error) {
	return nil, errors.New("not used")
}

func (h *scriptHost) Restore(context.Context, exechost.RestoreRequest) (*exechost.Execution, error) {
	return nil, errors.New("not used")
}

func (h *scriptHost) Terminate(_ context.Context, id exechost.ExecutionID) error {
	h.terminated = append(h.terminated, id)
	return nil
}

func TestProbeTool(t *testing.T) {
	ok := func(s string) *exechost.ExecResult { return &exechost.ExecResult{Stdout: []byte(s)} }
	tests := []struct {
		name      string
		host      *scriptHost
		wantUsage string
		wantType  string // ApplicationError type; "" = success, "retryable" = plain error
		wantMsg   string
		provision bool
	}{
		{name: "version matches, usage kept", host: &scriptHost{version: ok("1.2\n"), help: ok("usage: x\n")}, wantUsage: "usage: x\n", provision: true},
		{name: "usage on stderr", host: &scriptHost{version: ok("1.2"), help: &exechost.ExecResult{Stderr: []byte("usage on stderr")}}, wantUsage: "usage on stderr", provision: true},
		{name: "usage capped", host: &scriptHost{version: ok("1.2"), help: ok(strings.Repeat("u", MaxUsageBytes+100))}, wantUsage: strings.Repeat("u", MaxUsageBytes) + "\n…(truncated)", provision: true},
		{name: "version mismatch", host: &scriptHost{version: ok("1.3\n"), help: ok("")}, wantType: ErrTypeVersionMismatch, wantMsg: `printed "1.3", want "1.2"`, provision: true},
		{name: "non-zero exit", host: &scriptHost{version: &exechost.ExecResult{ExitCode: 127, Stderr: []byte("/bin/tool: not found")}}, wantType: ErrTypeProbeFailed, wantMsg: "exited 127: /bin/tool: not found", provision: true},
		{name: "timeout", host: &scriptHost{execErr: exechost.ErrTimeout}, wantType: ErrTypeProbeFailed, provision: true},
		{name: "policy refusal", host: &scriptHost{provisionErr: &exechost.PolicyError{Field: "image", Reason: "volume"}}, wantType: ErrTypePolicy, wantMsg: "policy: image: volume"},
		{name: "infrastructure error retries", host: &scriptHost{provisionErr: errors.New("docker down")}, wantType: "retryable", wantMsg: "docker down"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestActivityEnvironment()
			p := &Prober{Host: tc.host, Labels: map[string]string{"agentflow.test": "1"}}
			env.RegisterActivity(p)
			v, err := env.ExecuteActivity(p.ProbeTool, ProbeRequest{Name: "x", Version: "1.2", Image: imgA})
			if tc.wantType == "" {
				require.NoError(t, err)
				var res ProbeResult
				require.NoError(t, v.Get(&res))
				require.Equal(t, "1.2", res.Version)
				require.Equal(t, tc.wantUsage, res.Usage)
			} else {
				require.Error(t, err)
				require.Contains(t, err.Error(), tc.wantMsg)
				var app *temporal.ApplicationError
				require.ErrorAs(t, err, &app)
				if tc.wantType == "retryable" {
					require.False(t, app.NonRetryable(), "infrastructure errors must retry")
				} else {
					require.Equal(t, tc.wantType, app.Type())
					require.True(t, app.NonRetryable())
				}
			}
			require.Len(t, tc.host.provisioned, 1)
			req := tc.host.provisioned[0]
			require.Equal(t, exechost.NetworkNone, req.Network)
			require.Equal(t, imgA, req.Image)
			require.Equal(t, "1", req.Labels["agentflow.test"])
			require.Equal(t, probeLimits, req.Resources)
			if tc.provision {
				require.Equal(t, []exechost.ExecutionID{req.ExecutionID}, tc.host.terminated, "the sandbox is always terminated")
			} else {
				require.Empty(t, tc.host.terminated)
			}
		})
	}
}
