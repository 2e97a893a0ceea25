package activities

import (
	"errors"
	"fmt"

	"github.com/agentflow/agentflow/internal/failure"
)

// Failure classes, which retry, and the ApplicationError constructor live
// in internal/failure; this file only turns a classified attempt failure
// into it. The workflow's RetryPolicy lists the non-retryable types too;
// marking them NonRetryable here makes that hold even for a caller with
// another policy.

// stepError is one failed attempt, classified, before it becomes a Temporal
// ApplicationError. Msg and Details are already scrubbed of secrets.
type stepError struct {
	Type string
	// Reason refines a ToolFailed for metrics (metrics.ReasonOOM, ...);
	// empty otherwise. It stays on the worker.
	Reason  string
	Msg     string
	Details StepFailureDetails
}

func (e *stepError) Error() string { return e.Type + ": " + e.Msg }

// FailureType makes the attempt's class visible to failure.Kind.
func (e *stepError) FailureType() string { return e.Type }

func failf(typ string, format string, args ...any) *stepError {
	return &stepError{Type: typ, Msg: fmt.Sprintf(format, args...)}
}

// toTemporal maps RunStep's errors to what the activity returns: a
// cancellation stays the context's error (the SDK reports it as canceled),
// a *stepError becomes an ApplicationError of its Type with the stderr tail
// in the message and StepFailureDetails as details, anything else is an
// infrastructure failure (SandboxLost, retryable).
func toTemporal(err error) error {
	if err == nil {
		return nil
	}
	if failure.Kind(err) == failure.Canceled {
		return err
	}
	var se *stepError
	if !errors.As(err, &se) {
		se = &stepError{Type: failure.SandboxLost, Msg: err.Error()}
	}
	msg := se.Msg
	if se.Details.StderrTail != "" {
		msg += "\nstderr (tail):\n" + se.Details.StderrTail
	}
	return failure.New(se.Type, msg, se.Details)
}
