// Package failure is the one place where agentflow's failure classes are
// named, where it is decided which of them a retry can fix, and where a
// failure becomes a Temporal ApplicationError. The RunStep activity, the
// registry's probe activity and workflow, and AgentWorkflow all use it, so
// a type string such as "PolicyViolation" is written exactly once.
package failure

import (
	"context"
	"errors"
	"slices"

	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/secrets"
)

// Failure classes of one step attempt (RunStep). The workflow's
// RetryPolicy and agentctl branch on them.
const (
	ToolFailed      = "ToolFailed"      // non-zero exit, bad JSON, error field, OOM: retryable
	Timeout         = "ToolTimeout"     // the tool's own deadline: retryable
	OutputLimit     = "OutputLimit"     // output cap or inline payload limit: retryable
	PolicyViolation = "PolicyViolation" // the sandbox refused the request: never retried
	InvalidInput    = "InvalidInput"    // the request cannot work (bad secret, corrupt checkpoint): never retried
	SandboxLost     = "SandboxLost"     // infrastructure (daemon down, sandbox gone, worker died): retryable
	// StoreUnavailable: the checkpoint/log/result store could not be reached
	// or is full. Infrastructure: retryable.
	StoreUnavailable = "StoreUnavailable"
	// ImageUnavailable: the step's image is not on the worker and could not
	// be pulled right now. Infrastructure: retryable.
	ImageUnavailable = "ImageUnavailable"
	// ImageNotFound: the image cannot be had by this worker at all (a
	// local-only image ID it lacks, a digest the registry does not hold).
	// Never retried.
	ImageNotFound = "ImageNotFound"
	// SecretUnavailable: the store holding a step's secret (Vault) could
	// not be reached, failed or timed out. Infrastructure: retryable, like
	// StoreUnavailable (the secret may well be there a minute later).
	SecretUnavailable = "SecretUnavailable"
	// WorkerLost: Temporal timed the attempt out (no heartbeat, or past its
	// start-to-close budget): the worker running it died or froze. Not an
	// ApplicationError type an activity returns: AgentWorkflow names
	// Temporal's TimeoutError with it. Infrastructure: retryable.
	WorkerLost = "WorkerLost"
)

// Failure classes of the tool registry (register, remove, probe).
const (
	ToolConflict        = "ToolConflict"        // same name:version, different digest
	ToolNotFound        = "ToolNotFound"        // remove of an unknown tool
	ToolVersionMismatch = "ToolVersionMismatch" // --version printed something else
	ToolProbeFailed     = "ToolProbeFailed"     // --version/--help did not run cleanly
)

// Failure classes a whole run ends with (AgentWorkflow's error).
const (
	AgentFailed     = "AgentFailed"     // the run ended FAILED
	UnsupportedPlan = "UnsupportedPlan" // the Plan's schema version is unknown to this worker
)

// Canceled is the Kind of an attempt that ended because its context was
// canceled (or its deadline passed). It is a metrics status, not an
// ApplicationError type: Temporal reports cancellation itself.
const Canceled = "canceled"

// retryable lists every class; a class missing here is a programming error
// that Retryable answers conservatively (not retryable).
var retryable = map[string]bool{
	ToolFailed:          true,
	Timeout:             true,
	OutputLimit:         true,
	SandboxLost:         true,
	StoreUnavailable:    true,
	ImageUnavailable:    true,
	SecretUnavailable:   true,
	WorkerLost:          true,
	ImageNotFound:       false,
	PolicyViolation:     false,
	InvalidInput:        false,
	ToolConflict:        false,
	ToolNotFound:        false,
	ToolVersionMismatch: false,
	ToolProbeFailed:     false,
	AgentFailed:         false,
	UnsupportedPlan:     false,
}

// Retryable reports whether a retry can fix a failure of type typ. Unknown
// types are not retryable: retrying what nobody classified hides bugs.
func Retryable(typ string) bool { return retryable[typ] }

// stepTypes are the classes RunStep returns, in a fixed order.
var stepTypes = []string{ToolFailed, Timeout, OutputLimit, PolicyViolation, InvalidInput, SandboxLost,
	StoreUnavailable, ImageUnavailable, ImageNotFound, SecretUnavailable}

// infrastructure are the retryable classes that say nothing about the
// tool: the sandbox, the worker, the store or the image source failed.
// They are retried on their own budget, independently of a step's
// `retries` (which counts tool failures only).
var infrastructure = map[string]bool{SandboxLost: true, StoreUnavailable: true, ImageUnavailable: true,
	SecretUnavailable: true, WorkerLost: true}

// Infrastructure reports whether typ is an infrastructure failure (retried
// on the infrastructure budget, counted apart from tool failures).
func Infrastructure(typ string) bool { return infrastructure[typ] }

// probeTypes are the classes the registry's ProbeTool activity returns.
var probeTypes = []string{ToolVersionMismatch, ToolProbeFailed, PolicyViolation}

// NonRetryableTypes are RunStep's classes a retry cannot fix, for the
// step activity's RetryPolicy.NonRetryableErrorTypes.
func NonRetryableTypes() []string { return nonRetryable(stepTypes) }

// NonRetryableProbeTypes are the probe activity's classes a retry cannot
// fix, for its RetryPolicy.
func NonRetryableProbeTypes() []string { return nonRetryable(probeTypes) }

func nonRetryable(types []string) []string {
	var out []string
	for _, t := range types {
		if !Retryable(t) {
			out = append(out, t)
		}
	}
	return out
}

// StepTypes are every class RunStep can return (for documentation and
// tests).
func StepTypes() []string { return slices.Clone(stepTypes) }

// HostType classifies an ExecutionHost error by its sentinel. toolRan says
// the error is the outcome of the tool's own exec: only then do Timeout and
// OutputLimit describe the tool. Before the tool ran (provision, restore)
// and after it finished (checkpoint), a host timeout or size cap is the
// sandbox's problem, so it is SandboxLost. This is the only place that
// remap is written.
func HostType(err error, toolRan bool) string {
	var typ string
	switch {
	case errors.Is(err, exechost.ErrPolicy):
		typ = PolicyViolation
	case errors.Is(err, exechost.ErrTimeout):
		typ = Timeout
	case errors.Is(err, exechost.ErrOutputLimit):
		typ = OutputLimit
	case errors.Is(err, exechost.ErrCorruptCheckpoint):
		// A corrupt dependency checkpoint stays corrupt on every retry.
		typ = InvalidInput
	case errors.Is(err, exechost.ErrStoreUnavailable):
		typ = StoreUnavailable
	case errors.Is(err, exechost.ErrImageNotFound):
		typ = ImageNotFound
	case errors.Is(err, exechost.ErrImageUnavailable):
		typ = ImageUnavailable
	default:
		// Docker down, sandbox gone, checkpoint not on this worker, ...
		typ = SandboxLost
	}
	if !toolRan && (typ == Timeout || typ == OutputLimit) {
		typ = SandboxLost
	}
	return typ
}

// SecretType classifies an error of resolving a secret (secrets.Resolver)
// by its sentinel: a source the worker's operator or the secret store
// refuses is PolicyViolation, a store that cannot answer now is
// SecretUnavailable (retried), anything else (no such secret, key or
// value, a malformed or unsupported source) InvalidInput. The caller
// handles its own context's cancellation first.
func SecretType(err error) string {
	switch {
	case errors.Is(err, secrets.ErrNotAllowed): // also secrets.ErrDenied
		return PolicyViolation
	case errors.Is(err, secrets.ErrUnavailable):
		return SecretUnavailable
	default:
		return InvalidInput
	}
}

// Typed is implemented by domain errors that already carry their class
// (e.g. the activities' classified attempt failure).
type Typed interface {
	error
	FailureType() string
}

// Kind is the class of any error an activity or workflow saw: "" for nil,
// Canceled for a context cancellation or deadline, the type of a Typed
// error or of a Temporal ApplicationError, and SandboxLost for anything
// unclassified (an infrastructure failure).
func Kind(err error) string {
	if err == nil {
		return ""
	}
	var typed Typed
	if errors.As(err, &typed) {
		return typed.FailureType()
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() != "" {
		return app.Type()
	}
	var canceled *temporal.CanceledError
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &canceled) {
		return Canceled
	}
	return SandboxLost
}

// New is the one constructor of agentflow's Temporal ApplicationErrors: of
// type typ, non-retryable exactly when Retryable(typ) is false, with the
// given details (each is a payload the caller can decode).
func New(typ, msg string, details ...any) error {
	return temporal.NewApplicationErrorWithOptions(msg, typ, temporal.ApplicationErrorOptions{
		NonRetryable: !Retryable(typ),
		Details:      details,
	})
}
