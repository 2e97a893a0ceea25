package failure

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/secrets"
)

func TestRetryable(t *testing.T) {
	for typ, want := range map[string]bool{
		ToolFailed: true, Timeout: true, OutputLimit: true, SandboxLost: true,
		StoreUnavailable: true, ImageUnavailable: true, WorkerLost: true, ImageNotFound: false, SecretUnavailable: true,
		PolicyViolation: false, InvalidInput: false,
		ToolConflict: false, ToolNotFound: false, ToolVersionMismatch: false, ToolProbeFailed: false,
		AgentFailed: false, UnsupportedPlan: false,
		"SomethingNobodyClassified": false, "": false,
	} {
		require.Equal(t, want, Retryable(typ), typ)
	}
	require.ElementsMatch(t, []string{PolicyViolation, InvalidInput, ImageNotFound}, NonRetryableTypes())
	require.ElementsMatch(t, []string{ToolVersionMismatch, ToolProbeFailed, PolicyViolation}, NonRetryableProbeTypes())
	for _, typ := range StepTypes() {
		_, known := retryable[typ]
		require.True(t, known, "step type %s has no retry class", typ)
	}
}

func TestHostType(t *testing.T) {
	policy := &exechost.PolicyError{Field: "env.X", Reason: "no"}
	tests := []struct {
		name    string
		err     error
		toolRan bool
		want    string
	}{
		{"policy", policy, false, PolicyViolation},
		{"policy during exec", fmt.Errorf("exec: %w", policy), true, PolicyViolation},
		{"tool timeout", fmt.Errorf("exec: %w", exechost.ErrTimeout), true, Timeout},
		{"tool output cap", fmt.Errorf("exec: %w", exechost.ErrOutputLimit), true, OutputLimit},
		{"timeout before the tool ran", fmt.Errorf("restore: %w", exechost.ErrTimeout), false, SandboxLost},
		{"output cap before the tool ran", fmt.Errorf("restore: %w", exechost.ErrOutputLimit), false, SandboxLost},
		{"corrupt checkpoint", fmt.Errorf("restore cp: %w", exechost.ErrCorruptCheckpoint), false, InvalidInput},
		{"corrupt checkpoint during exec", fmt.Errorf("x: %w", exechost.ErrCorruptCheckpoint), true, InvalidInput},
		{"terminated", fmt.Errorf("exec: %w", exechost.ErrTerminated), true, SandboxLost},
		{"unclassified", errors.New("connection refused"), true, SandboxLost},
		{"store unavailable at restore", fmt.Errorf("restore: %w", exechost.ErrStoreUnavailable), false, StoreUnavailable},
		{"store unavailable at checkpoint", fmt.Errorf("checkpoint: %w", exechost.ErrStoreUnavailable), true, StoreUnavailable},
		{"image unavailable", fmt.Errorf("pull: %w", exechost.ErrImageUnavailable), false, ImageUnavailable},
		{"image not found", fmt.Errorf("image: %w", exechost.ErrImageNotFound), false, ImageNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, HostType(tc.err, tc.toolRan))
		})
	}
}

type typedErr struct{ typ string }

func (e typedErr) Error() string       { return "typed " + e.typ }
func (e typedErr) FailureType() string { return e.typ }

func TestKind(t *testing.T) {
	require.Equal(t, "", Kind(nil))
	require.Equal(t, Canceled, Kind(context.Canceled))
	require.Equal(t, Canceled, Kind(fmt.Errorf("exec: %w", context.DeadlineExceeded)))
	require.Equal(t, Canceled, Kind(temporal.NewCanceledError()))
	require.Equal(t, ToolFailed, Kind(fmt.Errorf("wrapped: %w", typedErr{ToolFailed})))
	require.Equal(t, PolicyViolation, Kind(New(PolicyViolation, "no")))
	require.Equal(t, SandboxLost, Kind(errors.New("daemon gone")))
	require.Equal(t, SandboxLost, Kind(temporal.NewApplicationError("untyped", "")))
}

func TestNew(t *testing.T) {
	for _, typ := range []string{ToolFailed, Timeout, OutputLimit, SandboxLost, PolicyViolation, InvalidInput, ToolConflict, AgentFailed} {
		t.Run(typ, func(t *testing.T) {
			err := New(typ, "what happened", map[string]int{"attempt": 2})
			var app *temporal.ApplicationError
			require.ErrorAs(t, err, &app)
			require.Equal(t, typ, app.Type())
			require.Equal(t, "what happened", app.Message())
			require.Equal(t, !Retryable(typ), app.NonRetryable())
			var d map[string]int
			require.True(t, app.HasDetails())
			require.NoError(t, app.Details(&d))
			require.Equal(t, 2, d["attempt"])
		})
	}
	var app *temporal.ApplicationError
	require.ErrorAs(t, New(ToolNotFound, "gone"), &app)
	require.False(t, app.HasDetails())
	require.True(t, app.NonRetryable())
}

func TestInfrastructure(t *testing.T) {
	for _, typ := range StepTypes() {
		want := typ == SandboxLost || typ == StoreUnavailable || typ == ImageUnavailable || typ == SecretUnavailable
		require.Equal(t, want, Infrastructure(typ), typ)
		if Infrastructure(typ) {
			require.True(t, Retryable(typ), "infrastructure class %s must be retryable", typ)
		}
	}
	require.True(t, Infrastructure(WorkerLost), "a lost worker is infrastructure")
	require.True(t, Retryable(WorkerLost))
	require.False(t, Infrastructure("SomethingNobodyClassified"))
}

func TestSecretType(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"operator policy", fmt.Errorf("vault://x/y: %w: not under a prefix", secrets.ErrNotAllowed), PolicyViolation},
		{"store denied (403)", &secrets.Error{Name: "s", Source: "vault://x/y", Err: fmt.Errorf("vault://x/y: %w", secrets.ErrDenied)}, PolicyViolation},
		{"store unavailable", &secrets.Error{Name: "s", Source: "vault://x/y", Err: fmt.Errorf("%w: 503", secrets.ErrUnavailable)}, SecretUnavailable},
		{"not found", fmt.Errorf("%w: 404", secrets.ErrNotFound), InvalidInput},
		{"invalid", secrets.ErrInvalidSource, InvalidInput},
		{"unsupported", secrets.ErrUnsupported, InvalidInput},
		{"unclassified", errors.New("boom"), InvalidInput},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, SecretType(tc.err))
		})
	}
	require.True(t, Infrastructure(SecretUnavailable), "retried on the infrastructure budget")
	require.Contains(t, StepTypes(), SecretUnavailable)
}
