package workflows

import "github.com/agentflow/agentflow/internal/failure"

// Error types of the ApplicationError AgentWorkflow ends with. agentctl
// branches on them (temporal.ApplicationError.Type()).
const (
	// ErrTypeAgentFailed: the run ended FAILED (a step failed without
	// continue_on_error, an output expression failed, or the run inputs were
	// invalid). Details carry the Result.
	ErrTypeAgentFailed = failure.AgentFailed
	// ErrTypeUnsupportedPlan: the Plan's schema version is unknown to this
	// worker (a newer agentctl submitted it). Details carry the Result.
	ErrTypeUnsupportedPlan = failure.UnsupportedPlan
)
