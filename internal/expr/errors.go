package expr

import (
	"errors"
	"fmt"
)

// ErrLimit is matched (errors.Is) by every error caused by a sandbox limit:
// template length, nesting depth, evaluation steps or result size. Callers
// treat it like any other invalid expression; it exists so tests and logs can
// tell "too big" from "wrong".
var ErrLimit = errors.New("expression limit exceeded")

// ErrSecretNotAvailable is returned when a secret template is evaluated.
// Secrets never pass through the evaluator: the workflow leaves the
// placeholder verbatim and the worker substitutes it (SubstituteSecrets).
var ErrSecretNotAvailable = errors.New("secret values are not available to expressions; they are substituted on the worker")

// ErrMissingSecret is returned by SubstituteSecrets when a placeholder names
// a secret that was not resolved for the step.
var ErrMissingSecret = errors.New("secret not resolved")

// SyntaxError is a parse-time (static) error. Offset is the byte offset into
// the template source; callers translate it into file:line:col.
type SyntaxError struct {
	Offset int
	Msg    string
	err    error // optional cause, e.g. ErrLimit
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("offset %d: %s", e.Offset, e.Msg) }

// Unwrap exposes the cause so errors.Is(err, ErrLimit) works.
func (e *SyntaxError) Unwrap() error { return e.err }

// EvalError is a run-time error. Offset is the byte offset into the template
// source of the sub-expression that failed.
type EvalError struct {
	Offset int
	Msg    string
	err    error
}

func (e *EvalError) Error() string { return fmt.Sprintf("offset %d: %s", e.Offset, e.Msg) }

// Unwrap exposes the cause (ErrLimit, ErrSecretNotAvailable).
func (e *EvalError) Unwrap() error { return e.err }

func syntaxErrf(off int, format string, args ...any) *SyntaxError {
	return &SyntaxError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

func limitSyntaxErr(off int, format string, args ...any) *SyntaxError {
	return &SyntaxError{Offset: off, Msg: fmt.Sprintf(format, args...), err: ErrLimit}
}

func evalErrf(off int, format string, args ...any) *EvalError {
	return &EvalError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

func limitEvalErr(off int, format string, args ...any) *EvalError {
	return &EvalError{Offset: off, Msg: fmt.Sprintf(format, args...), err: ErrLimit}
}
