package exechost

import "errors"

// Sentinel errors. Implementations wrap them (errors.Is) and may return
// richer typed errors such as *PolicyError.
var (
	// ErrPolicy: the request breaks the sandbox policy. Never retry.
	ErrPolicy = errors.New("sandbox policy violation")
	// ErrTimeout: the exec or the sandbox ran past its deadline.
	ErrTimeout = errors.New("sandbox deadline exceeded")
	// ErrOutputLimit: combined stdout+stderr passed MaxOutputBytes.
	ErrOutputLimit = errors.New("sandbox output limit exceeded")
	// ErrAborted: the caller's context ended while a command ran.
	ErrAborted = errors.New("sandbox exec aborted")
	// ErrNotFound: no such execution or checkpoint.
	ErrNotFound = errors.New("not found")
	// ErrTerminated: the execution was terminated (or destroyed by a limit).
	ErrTerminated = errors.New("execution terminated")
	// ErrCorruptCheckpoint: a checkpoint failed its manifest or content checks.
	ErrCorruptCheckpoint = errors.New("corrupt checkpoint")
	// ErrStoreUnavailable: the checkpoint (object) store could not be
	// reached or refused a write for lack of space. Infrastructure: retry,
	// never blame the tool.
	ErrStoreUnavailable = errors.New("checkpoint store unavailable")
	// ErrImageUnavailable: the image is not on this host and could not be
	// fetched right now (registry unreachable, pull interrupted). Retry.
	ErrImageUnavailable = errors.New("image unavailable")
	// ErrImageNotFound: the image is not on this host and cannot be fetched
	// by anyone (a local-only image ID, or a digest the registry does not
	// hold). Never retried.
	ErrImageNotFound = errors.New("image not found")
)

// PolicyError names the field of a request that broke policy.
type PolicyError struct {
	Field  string // e.g. "resources.memory", "env.API_TOKEN", "image"
	Reason string
}

func (e *PolicyError) Error() string { return "policy: " + e.Field + ": " + e.Reason }

// Is makes every *PolicyError match ErrPolicy.
func (e *PolicyError) Is(target error) bool { return target == ErrPolicy }
