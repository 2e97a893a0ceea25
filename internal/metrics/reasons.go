package metrics

import (
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/failure"
)

// Statuses of agentflow_tool_invocations_total and
// agentflow_step_duration_seconds. A canceled attempt is neither a success
// nor a tool failure: counting it as failed would page on every cancel.
const (
	StatusSuccess  = "success"
	StatusFailed   = "failed"
	StatusCanceled = "canceled"
)

// Reasons: the closed set of the `reason` label of
// agentflow_tool_invocations_total. One value per failure class of
// internal/failure that a step attempt can end with, plus the finer causes
// of a ToolFailed (the seed's parse_error among them), "none" for a
// success and "canceled". A dashboard can list them all and an alert can
// name one without guessing; Reason never returns anything else.
const (
	ReasonNone              = "none"
	ReasonExitCode          = "exit_code"   // ToolFailed: non-zero exit
	ReasonOOM               = "oom"         // ToolFailed: the kernel killed the tool for memory
	ReasonParseError        = "parse_error" // ToolFailed: stdout is not one JSON object
	ReasonToolError         = "tool_error"  // ToolFailed: the tool's own error field
	ReasonTimeout           = "timeout"
	ReasonOutputLimit       = "output_limit"
	ReasonPolicy            = "policy"
	ReasonInvalidInput      = "invalid_input"
	ReasonSandboxLost       = "sandbox_lost"
	ReasonStoreUnavailable  = "store_unavailable"
	ReasonSecretUnavailable = "secret_unavailable" // Vault unreachable or sealed
	ReasonImageUnavailable  = "image_unavailable"
	ReasonImageNotFound     = "image_not_found"
	ReasonWorkerLost        = "worker_lost"
	ReasonCanceled          = "canceled"
	// ReasonOther is a class nobody mapped: a test keeps every class of
	// internal/failure mapped, so seeing it is a bug.
	ReasonOther = "other"
)

// classReasons maps each failure class a step attempt can end with to
// its reason. ToolFailed's default is tool_error; the activity names the
// finer cause (ToolReasons) when it knows it.
var classReasons = map[string]string{
	failure.ToolFailed:        ReasonToolError,
	failure.Timeout:           ReasonTimeout,
	failure.OutputLimit:       ReasonOutputLimit,
	failure.PolicyViolation:   ReasonPolicy,
	failure.InvalidInput:      ReasonInvalidInput,
	failure.SandboxLost:       ReasonSandboxLost,
	failure.StoreUnavailable:  ReasonStoreUnavailable,
	failure.SecretUnavailable: ReasonSecretUnavailable,
	failure.ImageUnavailable:  ReasonImageUnavailable,
	failure.ImageNotFound:     ReasonImageNotFound,
	failure.WorkerLost:        ReasonWorkerLost,
	failure.Canceled:          ReasonCanceled,
}

// toolReasons are the causes of a ToolFailed that the activity tells apart.
var toolReasons = []string{ReasonExitCode, ReasonOOM, ReasonParseError, ReasonToolError}

// Reason is the reason label of an attempt that ended with failure class
// class ("" = success). detail refines a ToolFailed (one of ToolReasons);
// it is ignored for every other class and when it is not one of them.
func Reason(class, detail string) string {
	if class == "" {
		return ReasonNone
	}
	if class == failure.ToolFailed && slices.Contains(toolReasons, detail) {
		return detail
	}
	if r, ok := classReasons[class]; ok {
		return r
	}
	return ReasonOther
}

// Reasons is the whole closed set, sorted (for dashboards, docs, tests).
func Reasons() []string {
	set := []string{ReasonNone, ReasonOther}
	set = append(set, toolReasons...)
	for _, r := range classReasons {
		if !slices.Contains(set, r) {
			set = append(set, r)
		}
	}
	slices.Sort(set)
	return set
}

// InvocationStatus is the status label of an attempt that ended with
// failure class class ("" = success).
func InvocationStatus(class string) string {
	switch class {
	case "":
		return StatusSuccess
	case failure.Canceled:
		return StatusCanceled
	}
	return StatusFailed
}

// Run statuses of agentflow_run_finished_total and
// agentflow_run_duration_seconds: the seed's lower-case values
// (`status="failed"`), whatever case the workflow reports them in.
const (
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
	RunCanceled  = "canceled"
	RunOther     = "other" // a status that is not terminal: a caller's bug
)

var runStatuses = []string{RunSucceeded, RunFailed, RunCanceled}

// RunStatus maps a run's terminal status (SUCCEEDED, FAILED, CANCELED in
// the workflow's spelling) to its label value.
func RunStatus(s string) string {
	s = strings.ToLower(s)
	if slices.Contains(runStatuses, s) {
		return s
	}
	return RunOther
}
