package registry

import "github.com/agentflow/agentflow/internal/failure"

// Application error types returned by the register update and the probe;
// internal/failure defines them, which of them retry, and builds the
// errors (failure.New).
const (
	ErrTypeConflict        = failure.ToolConflict        // same name:version, different digest
	ErrTypeNotFound        = failure.ToolNotFound        // remove of an unknown tool
	ErrTypeVersionMismatch = failure.ToolVersionMismatch // --version printed something else
	ErrTypeProbeFailed     = failure.ToolProbeFailed     // --version/--help did not run cleanly
	ErrTypePolicy          = failure.PolicyViolation     // the sandbox refused the image
)
