// Package exechost is the stable boundary between the agentflow engine and
// the environment a step runs in. The engine depends only on ExecutionHost;
// containers, microVMs or remote workers are implementations of it.
//
// The Docker reference implementation lives in exechost/docker.
package exechost

import (
	"context"
	"io"
	"time"
)

// ExecutionID names one sandbox for its whole life. Callers choose it, so a
// retried provision with the same ID can adopt or replace what an earlier
// attempt left behind instead of creating a duplicate.
type ExecutionID string

// CheckpointID names one stored workspace snapshot.
type CheckpointID string

// ExecutionHost provisions sandboxes, runs commands in them, snapshots their
// workspace and destroys them.
//
// Contract, for every implementation:
//   - Provision validates the whole request before creating anything; a
//     request that breaks policy returns an error matching ErrPolicy and
//     leaves nothing behind. The host-neutral rules are Validator's (env
//     names and values, pinned images, floors, workspace syntax): every
//     host runs it and adds only the rules of its own mechanism.
//   - An image the host lacks and cannot obtain fails Provision with an
//     error matching ErrImageNotFound (and ErrNotFound) when no retry can
//     help (a local image ID, a digest nobody serves), or
//     ErrImageUnavailable when one may (the registry is unreachable).
//   - Exec and Checkpoint on the same execution never overlap (a checkpoint
//     sees a quiescent workspace). Exec calls on different executions are
//     independent and may run concurrently.
//   - When an Exec times out, exceeds its output cap or its context is
//     canceled, the whole sandbox is destroyed, not only the exec client; the
//     execution is then terminated and further calls return ErrTerminated.
//   - When the sandbox is destroyed by someone else while an Exec runs (an
//     operator's docker kill or rm -f, a daemon restart), Exec returns an
//     error matching ErrTerminated that says so, never the tool's exit
//     status as a result: the tool did not fail, its sandbox was lost. The
//     execution is then terminated (no checkpoint of it is attempted).
//   - Terminate is idempotent: terminating a terminated or unknown
//     execution returns nil.
//   - Restore re-runs the full Provision validation.
//   - A checkpoint holds only workspace files: no process, memory, network
//     state or credential.
//   - Checkpoint never stores a CheckpointRequest.Redact value: every byte of
//     file content that belongs to an occurrence is stored as '*' (same
//     length), and an entry the sandbox was not provisioned with whose name
//     or symlink target contains a value is refused with an error matching
//     ErrPolicy (nothing stored; the error never carries the name). The
//     execution stays usable after a refusal.
type ExecutionHost interface {
	Provision(ctx context.Context, req ProvisionRequest) (*Execution, error)
	Exec(ctx context.Context, id ExecutionID, req ExecRequest) (*ExecResult, error)
	Checkpoint(ctx context.Context, id ExecutionID, req CheckpointRequest) (*Checkpoint, error)
	Restore(ctx context.Context, req RestoreRequest) (*Execution, error)
	Terminate(ctx context.Context, id ExecutionID) error
}

// ResourceLimits bounds one sandbox. Every field except GPUs is required
// (zero is a policy violation).
type ResourceLimits struct {
	NanoCPUs       int64         // 1e9 = one CPU
	MemoryBytes    int64         // memory and memory+swap (no swap)
	DiskBytes      int64         // size of the /workspace tmpfs
	Pids           int64         // PidsLimit
	Runtime        time.Duration // wall-clock life of the sandbox
	MaxOutputBytes int64         // combined stdout+stderr cap per exec
	GPUs           int           // 0 none, >0 that many devices, -1 all
	// GPUDevices, when set, are exactly the devices the sandbox gets
	// (len(GPUDevices) == GPUs; CheckGPUDevice): a caller that shares a
	// host's GPUs between sandboxes pins each to its own. Without it the
	// host's runtime picks GPUs devices (Docker: always the first ones).
	// Not stored with a checkpoint: which device an attempt had is not
	// the workspace's.
	GPUDevices []string `json:"-"`
}

// NetworkMode is the sandbox network: NetworkNone (only loopback, the
// default) or NetworkEgress (egress.go).
type NetworkMode string

const NetworkNone NetworkMode = "none"

// GitSource imports one revision of a local repository as the workspace,
// from its raw objects (package gitsource): no worktree, no .git, no bind
// mount, nothing the repository configures. RepositoryPath must lie under a
// root the worker operator configured (worker --git-root).
type GitSource struct {
	RepositoryPath string
	Revision       string
}

// Workspace is the initial content of /workspace: empty (zero value), a git
// revision, or one or more checkpoints unpacked in order (later wins).
// Git and Checkpoints are mutually exclusive.
type Workspace struct {
	Git         *GitSource
	Checkpoints []CheckpointID
}

// ProvisionRequest creates a sandbox.
type ProvisionRequest struct {
	ExecutionID ExecutionID
	// Image is "repo@sha256:<digest>" or a local image ID "sha256:<hex>".
	Image     string
	Workspace Workspace
	Resources ResourceLimits
	Network   NetworkMode
	// Egress is what a NetworkEgress sandbox may reach; nil for
	// NetworkNone. Its header values may be secrets: hosts keep them out
	// of the sandbox, its configuration and every log.
	Egress *EgressPolicy
	// Env is plain configuration baked into the sandbox. Names that look like
	// tokens, secrets, passwords, API keys or credentials are refused; such
	// values travel in ExecRequest.Secrets.
	Env map[string]string
	// Labels are added to the sandbox (for ownership and reaping); keys under
	// the implementation's own prefix are reserved. A sandbox created before
	// the request (the Docker host's opt-in warm pool) carries only the
	// labels its pool was configured with, which the request must include;
	// its per-request labels are not on it (the host finds it by name).
	Labels map[string]string
}

// Execution describes a provisioned sandbox.
type Execution struct {
	ExecutionID ExecutionID
	// ImageDigest is the immutable identity of the image that runs.
	ImageDigest string
	// Deadline is when the sandbox destroys itself whatever happens.
	Deadline time.Time
}

// ExecRequest runs one command in a sandbox.
type ExecRequest struct {
	Command []string
	Stdin   []byte
	Env     map[string]string
	// Secrets are exported to the process environment only. They are never
	// written to the sandbox's configuration, to disk, or to logs.
	Secrets map[string]string
	// Timeout bounds this exec; zero means the sandbox's remaining runtime.
	Timeout time.Duration
	// Stderr, when set, receives the command's stderr while it runs, in
	// addition to ExecResult.Stderr (live logs). Hosts deliver through a
	// LiveStream: what the command wrote before it ended has been handed
	// to Stderr when Exec returns (unless Stderr is stuck for longer than
	// LiveStreamCloseWait), and a slow or failing Stderr never stalls or
	// fails the exec (it loses bytes, with a note, instead). Only what
	// passes the output cap reaches it.
	Stderr io.Writer
}

// ExecResult is what a command did. A non-zero exit is a result, not an
// error: policy on top decides what it means.
type ExecResult struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	Duration time.Duration
	// TimedOut, Truncated and Aborted report why the sandbox was destroyed;
	// Exec then also returns an error matching ErrTimeout, ErrOutputLimit or
	// ErrAborted together with this partial result.
	TimedOut  bool
	Truncated bool
	Aborted   bool
	// OOMKilled reports that the kernel killed a process for memory.
	OOMKilled bool
}

// CheckpointRequest snapshots /workspace.
type CheckpointRequest struct {
	Reason string
	// Redact are values that must not appear in the stored checkpoint (the
	// step's secret values and their encoded forms, see SecretForms). Every byte of regular
	// file content that belongs to an occurrence of any value, overlapping
	// occurrences included, is replaced by one '*': the same length, so the
	// stored archive stays valid and the manifest's size and SHA-256 describe
	// exactly what is stored. An entry whose name or symlink target contains
	// a value is refused with a *PolicyError whose Field is PolicyFieldRedact
	// (so matching ErrPolicy) and nothing is stored: a name cannot be
	// rewritten without breaking the references the tool made to it. Entries
	// the sandbox was provisioned with (same name, same symlink target) are
	// exempt: their names are stored already and are not this step's doing.
	// Empty strings are ignored.
	Redact []string
}

// PolicyFieldRedact is the PolicyError.Field of a checkpoint refused because
// an entry's name or symlink target contains a CheckpointRequest.Redact value.
const PolicyFieldRedact = "checkpoint.redact"

// PolicyFieldCheckpointWorkspace is the PolicyError field when a checkpoint
// is refused because the workspace holds an entry no checkpoint may store
// (a symlink that could lead out, see CheckSymlink; a hard link; a device).
const PolicyFieldCheckpointWorkspace = "checkpoint.workspace"

// Checkpoint describes a stored snapshot.
type Checkpoint struct {
	CheckpointID CheckpointID
	ExecutionID  ExecutionID
	ImageDigest  string
	SizeBytes    int64
	SHA256       string
	CreatedAt    time.Time
}

// RestoreRequest provisions a new sandbox whose workspace is a checkpoint.
// Image and Resources are required: they never come from the checkpoint's
// manifest (stored data is not trusted for what a sandbox may use). The
// request is validated exactly like a Provision.
type RestoreRequest struct {
	CheckpointID CheckpointID
	ExecutionID  ExecutionID
	Image        string
	Resources    *ResourceLimits
	Env          map[string]string
	Labels       map[string]string
}

// RestoreProvision is the ProvisionRequest a Restore runs. A request
// without Image or Resources is refused (ErrPolicy).
func RestoreProvision(req RestoreRequest) (ProvisionRequest, error) {
	switch {
	case req.Image == "":
		return ProvisionRequest{}, &PolicyError{Field: "image", Reason: "restore needs the step's own image, never the checkpoint's"}
	case req.Resources == nil:
		return ProvisionRequest{}, &PolicyError{Field: "resources", Reason: "restore needs the step's own resources, never the checkpoint's"}
	}
	return ProvisionRequest{
		ExecutionID: req.ExecutionID,
		Image:       req.Image,
		Resources:   *req.Resources,
		Network:     NetworkNone,
		Env:         req.Env,
		Labels:      req.Labels,
		Workspace:   Workspace{Checkpoints: []CheckpointID{req.CheckpointID}},
	}, nil
}
