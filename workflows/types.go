package workflows

import (
	"time"

	"github.com/agentflow/agentflow/internal/spec"
)

// Names shared by the workflow, the worker and agentctl. Changing any of
// them breaks running workflows and existing clients.
const (
	WorkflowName   = "AgentWorkflow"
	TaskQueue      = "agentflow"
	StatusQuery    = "status"
	ApprovalSignal = "approval"

	// Search attributes (registered by `make up` / `agentctl dev`).
	SearchAttrAgentName = "AgentName"   // keyword: the agent ID (workflow ID)
	SearchAttrSpec      = "AgentSpec"   // keyword: spec name
	SearchAttrStatus    = "AgentStatus" // keyword: PENDING|RUNNING|SUCCEEDED|FAILED|CANCELED

	MemoSpecName    = "spec_name"
	MemoSpecVersion = "spec_version"
)

// SearchAttributes are the custom search attributes agentflow needs on a
// namespace, all of type Keyword: the dev server registers them at start,
// `agentctl setup` on any other cluster. The one list.
var SearchAttributes = []string{SearchAttrAgentName, SearchAttrSpec, SearchAttrStatus}

// Run statuses (SPEC §5).
const (
	RunPending   = "PENDING"
	RunRunning   = "RUNNING"
	RunSucceeded = "SUCCEEDED"
	RunFailed    = "FAILED"
	RunCanceled  = "CANCELED"
)

// Step statuses (SPEC §5).
const (
	StepPending         = "pending"
	StepRunning         = "running"
	StepWaitingApproval = "waiting_approval"
	StepSuccess         = "success"
	StepFailed          = "failed"
	StepSkipped         = "skipped"
	StepCanceled        = "canceled"
)

// Skip reasons.
const (
	ReasonUpstreamFailed = "upstream_failed"
	ReasonConditionFalse = "condition_false"
)

// Input is the workflow input. Tools in Plan.Steps are already resolved
// to digest-pinned images (Image set) by the submitter.
type Input struct {
	Plan   spec.Plan      `json:"plan"`
	Inputs map[string]any `json:"inputs,omitempty"`
	// Carry holds steps taken as-is from a previous run (resume): their
	// status, output and checkpoint are reused and they are not executed.
	Carry map[string]StepRecord `json:"carry,omitempty"`
	// ResumedFrom is the run ID the carried steps come from.
	ResumedFrom string `json:"resumed_from,omitempty"`
}

// Result is the workflow result: the evaluated outputs and final statuses.
type Result struct {
	Status  string         `json:"status"`
	Outputs map[string]any `json:"outputs,omitempty"`
	Error   string         `json:"error,omitempty"`
}

// StepRecord is one step's state in the inspect document.
type StepRecord struct {
	ID           string         `json:"id"`
	Status       string         `json:"status"`
	Reason       string         `json:"reason,omitempty"`
	Attempts     int32          `json:"attempts,omitempty"`
	StartedAt    *time.Time     `json:"started_at,omitempty"`
	FinishedAt   *time.Time     `json:"finished_at,omitempty"`
	DurationMS   int64          `json:"duration_ms"` // always present: 0 is a real duration
	Error        string         `json:"error,omitempty"`
	CheckpointID string         `json:"checkpoint_id,omitempty"`
	Output       map[string]any `json:"output,omitempty"`
	Tool         string         `json:"tool,omitempty"`
	Image        string         `json:"image,omitempty"`
	// Egress is what the step may reach: "host:port", then " +Name" per
	// header the proxy adds (never a value). Empty: network none.
	Egress []string `json:"egress,omitempty"`
	// Approval outcome, for approval steps.
	ApprovedBy string `json:"approved_by,omitempty"`
	Comment    string `json:"comment,omitempty"`
	// Carried is set when the step was taken from a previous run.
	Carried bool `json:"carried,omitempty"`
	// AttemptHistory is every attempt of a tool step, in order (runs on
	// the infrastructure-retry version; empty for older runs). It holds at
	// most retries+maxInfraFailures records.
	AttemptHistory []AttemptRecord `json:"attempt_history,omitempty"`
}

// Attempt outcomes (AttemptRecord.Status).
const (
	AttemptRunning  = "running"
	AttemptSuccess  = "success"
	AttemptFailed   = "failed"
	AttemptCanceled = "canceled"
)

// Failure classes of an attempt (AttemptRecord.Class): which budget the
// failure counted against.
const (
	// ClassTool: the tool failed (ToolFailed, ToolTimeout, OutputLimit);
	// counts against the step's `retries`.
	ClassTool = "tool"
	// ClassInfrastructure: the sandbox, the worker, the store or the image
	// source failed; counts against the infrastructure budget.
	ClassInfrastructure = "infrastructure"
	// ClassPermanent: a retry cannot fix it (PolicyViolation, InvalidInput,
	// ImageNotFound, any non-retryable error); the step fails at once.
	ClassPermanent = "permanent"
)

// AttemptRecord is one attempt of a tool step in the inspect document.
type AttemptRecord struct {
	Attempt int32  `json:"attempt"`
	Status  string `json:"status"`
	// Class, Type and Error describe a failed attempt: the budget it
	// counted against, its failure type (e.g. SandboxLost, or
	// WorkerLost when Temporal timed it out) and the first line of its
	// message (without the type).
	Class string `json:"class,omitempty"`
	Type  string `json:"type,omitempty"`
	Error string `json:"error,omitempty"`
	// Worker is the identity of the worker that ran the attempt, when known.
	Worker     string     `json:"worker,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// AdoptedFrom is set when this attempt adopted the recorded result of
	// an earlier attempt instead of running the tool: that attempt's number.
	AdoptedFrom int32 `json:"adopted_from,omitempty"`
}

// Status is the inspect document (SPEC §6), returned by the status query.
type Status struct {
	ID          string         `json:"id"`
	RunID       string         `json:"run_id"`
	Name        string         `json:"name"`
	Version     string         `json:"version"`
	Status      string         `json:"status"`
	CurrentStep string         `json:"current_step,omitempty"`
	Progress    string         `json:"progress"`
	StartedAt   *time.Time     `json:"started_at,omitempty"`
	FinishedAt  *time.Time     `json:"finished_at,omitempty"`
	StepHistory []StepRecord   `json:"step_history"`
	Context     map[string]any `json:"context"`
	Outputs     map[string]any `json:"outputs,omitempty"`
	Error       string         `json:"error,omitempty"`
	ResumedFrom string         `json:"resumed_from,omitempty"`
}

// ApprovalDecision is the payload of the approval signal.
type ApprovalDecision struct {
	Step    string `json:"step"`
	Approve bool   `json:"approve"`
	Comment string `json:"comment,omitempty"`
	By      string `json:"by,omitempty"`
}
