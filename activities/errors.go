package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/exechost"
)

// This file is the one place where domain errors become Temporal errors.
// The workflow's RetryPolicy lists the non-retryable types too; marking them
// NonRetryable here makes that hold even for a caller with another policy.

// stepError is one failed attempt, classified, before it becomes a Temporal
// ApplicationError. Msg and Details are already scrubbed of secrets.
type stepError struct {
	Type    string
	Msg     string
	Details StepFailureDetails
}

func (e *stepError) Error() string { return e.Type + ": " + e.Msg }

func failf(typ string, format string, args ...any) *stepError {
	return &stepError{Type: typ, Msg: fmt.Sprintf(format, args...)}
}

// nonRetryable reports the failure types a retry cannot fix.
func nonRetryable(typ string) bool {
	return typ == ErrTypePolicy || typ == ErrTypeInvalidInput
}

// hostErrorType classifies an ExecutionHost error by its sentinel.
func hostErrorType(err error) string {
	switch {
	case errors.Is(err, exechost.ErrPolicy):
		return ErrTypePolicy
	case errors.Is(err, exechost.ErrTimeout):
		return ErrTypeTimeout
	case errors.Is(err, exechost.ErrOutputLimit):
		return ErrTypeOutputLimit
	case errors.Is(err, exechost.ErrCorruptCheckpoint):
		// A corrupt dependency checkpoint stays corrupt on every retry.
		return ErrTypeInvalidInput
	default:
		// Docker down, sandbox gone, checkpoint not on this worker, ...
		return ErrTypeSandboxLost
	}
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
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var se *stepError
	if !errors.As(err, &se) {
		se = &stepError{Type: ErrTypeSandboxLost, Msg: err.Error()}
	}
	msg := se.Msg
	if se.Details.StderrTail != "" {
		msg += "\nstderr (tail):\n" + se.Details.StderrTail
	}
	return temporal.NewApplicationErrorWithOptions(msg, se.Type, temporal.ApplicationErrorOptions{
		NonRetryable: nonRetryable(se.Type),
		Details:      []any{se.Details},
	})
}
