package activities

import (
	"time"

	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/internal/spec"
)

// StepRequest is the input of the RunStep activity: everything one attempt of
// one tool step needs, already rendered by the workflow. It is recorded in
// Temporal history, so it never carries a secret value: strings that are
// exactly a secret expression ("{{ .secrets.NAME }}") are left verbatim and
// substituted on the worker, inside the activity.
type StepRequest struct {
	AgentID string `json:"agent_id"` // workflow ID
	RunID   string `json:"run_id"`   // workflow run ID
	StepID  string `json:"step_id"`
	Tool    string `json:"tool,omitempty"` // name:version, for display and metrics
	Image   string `json:"image"`          // digest-pinned reference

	Input map[string]any    `json:"input"`
	Env   map[string]string `json:"env,omitempty"`
	// SecretSources maps each secret this step references to its source
	// (env://, file://, vault://). Only these are resolved.
	SecretSources map[string]string `json:"secret_sources,omitempty"`

	Resources spec.Resources `json:"resources"`
	Timeout   time.Duration  `json:"timeout"`
	// Egress is the step's allow-list; header values are still templates
	// (secret placeholders verbatim), substituted on the worker.
	Egress []spec.EgressRule `json:"egress,omitempty"`

	// Workspace: a git revision for root steps, or the checkpoints of the
	// step's dependencies in depends_on order (later wins).
	Git         *spec.GitWorkspace `json:"git,omitempty"`
	Checkpoints []string           `json:"checkpoints,omitempty"`

	// Attempt is the workflow's number for this attempt of the step, 1-based
	// over every attempt (tool and infrastructure failures alike). The
	// workflow retries the step itself (one activity execution per attempt),
	// so the activity's own attempt counter is always 1 and this field is
	// what the sandbox, the log and the result record are keyed by. 0 (runs
	// recorded before the field existed) means the activity's attempt.
	Attempt int32 `json:"attempt,omitempty"`
}

// StepResult is the output of one successful attempt.
type StepResult struct {
	Output       map[string]any `json:"output"`
	CheckpointID string         `json:"checkpoint_id,omitempty"`
	Attempt      int32          `json:"attempt"`
	OutputBytes  int            `json:"output_bytes"`
	ImageDigest  string         `json:"image_digest,omitempty"`
	// Worker is the identity of the worker that ran the tool.
	Worker string `json:"worker,omitempty"`
	// AdoptedFrom is set when this attempt did not run the tool but adopted
	// the recorded result of an earlier attempt that finished (e.g. during
	// a Temporal outage) and whose completion was lost: its number.
	AdoptedFrom int32 `json:"adopted_from,omitempty"`
}

// Application error types returned by RunStep (temporal.ApplicationError
// Type). The workflow branches on them; internal/failure defines them and
// which of them retry.
const (
	ErrTypeToolFailed   = failure.ToolFailed      // non-zero exit, bad JSON, error field, OOM: retryable
	ErrTypeTimeout      = failure.Timeout         // attempt deadline: retryable
	ErrTypeOutputLimit  = failure.OutputLimit     // output cap or inline payload limit: retryable
	ErrTypePolicy       = failure.PolicyViolation // never retried
	ErrTypeInvalidInput = failure.InvalidInput    // never retried (e.g. unresolvable secret)
	ErrTypeSandboxLost  = failure.SandboxLost     // infrastructure: retryable
)

// StepFailureDetails is attached to a failed attempt's ApplicationError so
// the workflow can record the checkpoint and log tail of failed attempts.
type StepFailureDetails struct {
	Attempt      int32  `json:"attempt"`
	CheckpointID string `json:"checkpoint_id,omitempty"`
	ExitCode     int    `json:"exit_code"`
	StderrTail   string `json:"stderr_tail,omitempty"`
	// Worker is the identity of the worker the attempt ran on.
	Worker string `json:"worker,omitempty"`
}

// RunEvent is the input of the RunFinished activity: the terminal state of
// a run, used for metrics and webhooks (SPEC §9). No secret values.
type RunEvent struct {
	AgentID    string         `json:"agent_id"`
	RunID      string         `json:"run_id"`
	Spec       string         `json:"spec"`
	Version    string         `json:"version"`
	Status     string         `json:"status"`
	Error      string         `json:"error,omitempty"`
	DurationMS int64          `json:"duration_ms"`
	Outputs    map[string]any `json:"outputs,omitempty"`
	Webhooks   []string       `json:"webhooks,omitempty"` // spec-level notify URLs
	// MetricsRecorded: RunEnded has already counted the run (then
	// RunFinished only delivers). Never sent to a webhook.
	MetricsRecorded bool `json:"metrics_recorded,omitempty"`
}
