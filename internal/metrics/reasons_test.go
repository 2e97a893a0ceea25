package metrics

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/failure"
)

// Every class a step attempt can end with (RunStep's, the workflow's
// WorkerLost, a cancellation) has its own reason: none falls to "other".
func TestEveryStepFailureClassHasAReason(t *testing.T) {
	classes := append(failure.StepTypes(), failure.WorkerLost, failure.Canceled)
	seen := map[string]string{}
	for _, class := range classes {
		r := Reason(class, "")
		require.NotEqual(t, ReasonOther, r, "class %s has no reason", class)
		require.Contains(t, Reasons(), r)
		if prev, dup := seen[r]; dup {
			t.Fatalf("classes %s and %s share reason %s", prev, class, r)
		}
		seen[r] = class
	}
}

func TestReason(t *testing.T) {
	tests := []struct {
		name, class, detail, want string
	}{
		{"success", "", "", "none"},
		{"success ignores detail", "", ReasonOOM, "none"},
		{"tool failed, cause unknown", failure.ToolFailed, "", "tool_error"},
		{"exit code", failure.ToolFailed, ReasonExitCode, "exit_code"},
		{"oom", failure.ToolFailed, ReasonOOM, "oom"},
		{"parse error", failure.ToolFailed, ReasonParseError, "parse_error"},
		{"error field", failure.ToolFailed, ReasonToolError, "tool_error"},
		{"detail outside the tool causes", failure.ToolFailed, "sandbox_lost", "tool_error"},
		{"detail on another class is ignored", failure.SandboxLost, ReasonOOM, "sandbox_lost"},
		{"timeout", failure.Timeout, "", "timeout"},
		{"output limit", failure.OutputLimit, "", "output_limit"},
		{"policy", failure.PolicyViolation, "", "policy"},
		{"invalid input", failure.InvalidInput, "", "invalid_input"},
		{"store", failure.StoreUnavailable, "", "store_unavailable"},
		{"image unavailable", failure.ImageUnavailable, "", "image_unavailable"},
		{"image not found", failure.ImageNotFound, "", "image_not_found"},
		{"worker lost", failure.WorkerLost, "", "worker_lost"},
		{"canceled", failure.Canceled, "", "canceled"},
		{"unmapped class", "SomethingNew", "", "other"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Reason(tc.class, tc.detail))
		})
	}
}

func TestReasonsIsTheClosedSet(t *testing.T) {
	want := []string{"canceled", "exit_code", "image_not_found", "image_unavailable", "invalid_input", "none",
		"oom", "other", "output_limit", "parse_error", "policy", "sandbox_lost", "secret_unavailable", "store_unavailable",
		"timeout", "tool_error", "worker_lost"}
	require.Equal(t, want, Reasons())
	require.True(t, slices.IsSorted(Reasons()))
}

func TestStatuses(t *testing.T) {
	for class, want := range map[string]string{
		"": "success", failure.Canceled: "canceled",
		failure.ToolFailed: "failed", failure.SandboxLost: "failed", failure.PolicyViolation: "failed",
	} {
		require.Equal(t, want, InvocationStatus(class), class)
	}
	for in, want := range map[string]string{
		"SUCCEEDED": "succeeded", "FAILED": "failed", "CANCELED": "canceled", "failed": "failed",
		"RUNNING": "other", "": "other",
	} {
		require.Equal(t, want, RunStatus(in), in)
	}
}
