package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/hosttest"
)

// testSecret is what AF_TEST_TOKEN resolves to in the harness.
const testSecret = "tok-S3CR3T-value"

// wsTool plays a tool that writes the files its input names, like the
// wsfile tool: {"write": {"path": "content"}}.
func wsTool(ctx context.Context, x hosttest.ExecContext) hosttest.Result {
	if len(x.Argv) == 0 || x.Argv[0] != ToolCommand[0] {
		return hosttest.DefaultHandler(ctx, x)
	}
	var in struct {
		Write map[string]string `json:"write"`
	}
	if err := json.Unmarshal(x.Stdin, &in); err != nil {
		return hosttest.Result{ExitCode: 2, Stderr: []byte(err.Error())}
	}
	for p, c := range in.Write {
		if err := x.Workspace.WriteFile(p, []byte(c), 0); err != nil {
			return hosttest.Result{ExitCode: 1, Stderr: []byte(err.Error())}
		}
	}
	return hosttest.Result{Stdout: []byte(`{"ok":true}`)}
}

func secretReq(write map[string]any) StepRequest {
	req := baseReq()
	req.Checkpoints = nil
	req.SecretSources = map[string]string{"api_token": "env://AF_TEST_TOKEN", "quote": "env://AF_QUOTE"}
	req.Input = map[string]any{"write": write}
	return req
}

// TestRunStepCheckpointIsRedacted runs RunStep on the contract-enforcing
// Fake: a secret the tool writes into /workspace is stored as '*'s of the
// same length (its JSON-escaped form too), a file named after it fails the
// attempt without retry and without quoting it.
func TestRunStepCheckpointIsRedacted(t *testing.T) {
	stars := func(s string) string { return strings.Repeat("*", len(s)) }
	t.Run("content", func(t *testing.T) {
		h := newHarness(t)
		f, err := hosttest.NewFake(hosttest.Options{Handler: wsTool})
		require.NoError(t, err)
		h.other = f
		res, err := h.run(t, secretReq(map[string]any{
			"leak.txt":  "{{ .secrets.api_token }}",
			"quote.txt": "{{ .secrets.quote }}",
			"plain.txt": "hello",
		}))
		require.NoError(t, err)
		files, err := f.CheckpointFiles(exechost.CheckpointID(res.CheckpointID))
		require.NoError(t, err)
		require.Equal(t, stars(testSecret), string(files["leak.txt"].Data))
		require.Equal(t, stars(`a"b`), string(files["quote.txt"].Data))
		require.Equal(t, "hello", string(files["plain.txt"].Data))
		require.NotContains(t, string(hosttest.Encode(files)), testSecret)
	})

	t.Run("name", func(t *testing.T) {
		h := newHarness(t)
		// The tool builds the name itself (the input can only carry a
		// secret as a whole string); here it is the handler's job.
		tool := func(ctx context.Context, x hosttest.ExecContext) hosttest.Result {
			if x.Argv[0] == ToolCommand[0] {
				var in struct{ Write map[string]string }
				_ = json.Unmarshal(x.Stdin, &in)
				_ = x.Workspace.WriteFile("out/"+in.Write["name"]+".txt", []byte("x"), 0)
				return hosttest.Result{Stdout: []byte(`{}`)}
			}
			return wsTool(ctx, x)
		}
		f, err := hosttest.NewFake(hosttest.Options{Handler: tool})
		require.NoError(t, err)
		h.other = f
		req := secretReq(map[string]any{"name": "{{ .secrets.api_token }}"})
		_, err = h.run(t, req)
		requireSecretNameRefusal(t, h, req, err)
		require.Zero(t, f.Stats().Live, "the sandbox is terminated")
	})
}

// TestRunStepCheckpointRefusedForSecretName: the scripted host refuses the
// checkpoint as a host does; the attempt fails non-retryably.
func TestRunStepCheckpointRefusedForSecretName(t *testing.T) {
	h := newHarness(t)
	h.host.checkpoint = fmt.Errorf("checkpoint af-1: %w: tar entry #3: name refused",
		&exechost.PolicyError{Field: exechost.PolicyFieldRedact, Reason: "workspace entry refused"})
	req := secretReq(map[string]any{"a": "{{ .secrets.api_token }}"})
	_, err := h.run(t, req)
	requireSecretNameRefusal(t, h, req, err)
	_, _, _, terminates, live := h.host.snapshot()
	require.Len(t, terminates, 1)
	require.Zero(t, live)
}

func requireSecretNameRefusal(t *testing.T, h *harness, req StepRequest, err error) {
	t.Helper()
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, ErrTypePolicy, appErr.Type())
	require.True(t, appErr.NonRetryable())
	require.Contains(t, appErr.Message(), "a workspace entry name (or symlink target) contains a secret value")
	require.NotContains(t, err.Error(), testSecret)
	log := h.log(t, req)
	require.Contains(t, log, "contains a secret value")
	require.NotContains(t, log, testSecret)
}
