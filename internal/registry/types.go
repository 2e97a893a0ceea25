// Package registry is the tool registry, stored in Temporal itself: one
// long-lived workflow (ToolRegistry, fixed workflow ID) holds every
// registered tool in its state, changes arrive as Temporal Updates (validated
// before they reach history), reads are queries, and the workflow
// continues-as-new carrying the map so its history stays short. No extra
// database is needed and the registry is as durable as the runs that use it.
//
// Registration probes the image on a worker (ProbeTool activity): it runs
// `/bin/tool --version` (must print the registered version) and
// `/bin/tool --help` (kept as the usage) inside a sandbox.
package registry

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentflow/agentflow/exechost"
)

// Names shared by the registry workflow, the worker and agentctl.
const (
	WorkflowName   = "ToolRegistry"
	WorkflowID     = "agentflow-tool-registry"
	UpdateRegister = "register"
	UpdateRemove   = "remove"
	QueryTools     = "tools"

	// MaxUsageBytes caps the stored --help text: it lives in workflow state
	// and is carried across continue-as-new.
	MaxUsageBytes = 16 << 10
)

// Tool is one registered name:version.
type Tool struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Image is the immutable reference runs use: repo@sha256:… or a local
	// image ID sha256:….
	Image string `json:"image"`
	// Digest is the sha256:… part of Image.
	Digest      string `json:"digest"`
	Description string `json:"description,omitempty"`
	Usage       string `json:"usage,omitempty"`
	// PinnedFrom is the mutable tag Image was resolved from (--pin), if any.
	PinnedFrom   string    `json:"pinned_from,omitempty"`
	RegisteredAt time.Time `json:"registered_at"`
}

// Ref is "name:version".
func (t Tool) Ref() string { return t.Name + ":" + t.Version }

// RegisterRequest is the argument of the register update.
type RegisterRequest struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Image       string `json:"image"`
	Description string `json:"description,omitempty"`
	PinnedFrom  string `json:"pinned_from,omitempty"`
}

// RemoveRequest is the argument of the remove update. An empty Version
// removes every version of Name.
type RemoveRequest struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// State is the registry's whole state: the workflow input, carried across
// continue-as-new.
type State struct {
	Tools map[string]map[string]Tool `json:"tools,omitempty"`
	// MaxUpdates bounds the updates one run handles before it
	// continues-as-new (0 = DefaultMaxUpdates). Tests lower it.
	MaxUpdates int `json:"max_updates,omitempty"`
}

// DefaultMaxUpdates keeps each registry run's history well below the
// server's limits: an update with a probe activity costs about ten events.
const DefaultMaxUpdates = 200

// ProbeRequest is the input of the ProbeTool activity.
type ProbeRequest struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Image   string `json:"image"`
}

// ProbeResult is what ProbeTool found in the image.
type ProbeResult struct {
	Version     string `json:"version"`
	Usage       string `json:"usage"`
	ImageDigest string `json:"image_digest,omitempty"`
}

var (
	// Compiled on first use: every agentctl start (validate must stay fast)
	// would otherwise pay for these at package init.
	nameRe    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$`) })
	versionRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$`) })
)

// ErrInvalid marks a request that is malformed (bad name, version or
// reference); the CLI maps it to exit code 2.
var ErrInvalid = errors.New("invalid tool registration")

// ValidateName checks a tool name (DNS-label-like, dots allowed).
func ValidateName(name string) error {
	if !nameRe().MatchString(name) {
		return fmt.Errorf("%w: tool name %q: want lowercase letters, digits, '.', '_' or '-' (at most 64)", ErrInvalid, name)
	}
	return nil
}

// ValidateVersion checks a tool version (what `/bin/tool --version` prints).
func ValidateVersion(v string) error {
	if !versionRe().MatchString(v) {
		return fmt.Errorf("%w: tool version %q: want letters, digits, '.', '_', '+' or '-' (at most 64)", ErrInvalid, v)
	}
	return nil
}

// ValidateImageRef accepts only immutable references (the sandbox rule,
// exechost.CheckPinnedImage): repo@sha256:<64 hex> or a local image ID
// sha256:<64 hex>; name:tag@sha256:… is refused. A mutable tag is refused;
// the CLI resolves one with --pin before it gets here.
func ValidateImageRef(ref string) error {
	switch err := exechost.CheckPinnedImage(ref); {
	case err == nil:
		return nil
	case errors.Is(err, exechost.ErrUnpinnedImage):
		return fmt.Errorf("%w: image %q is not digest-pinned: use repo@sha256:<digest> or a local image ID sha256:<hex>, or pass --pin to resolve a tag", ErrInvalid, ref)
	default:
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
}

// DigestOf returns the sha256:… part of a validated reference.
func DigestOf(ref string) string {
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		return ref[i+1:]
	}
	return ref
}

// Validate checks a register request without touching any state.
func (r RegisterRequest) Validate() error {
	return errors.Join(ValidateName(r.Name), ValidateVersion(r.Version), ValidateImageRef(r.Image))
}

// ParseRef splits "name:version" (version optional: "name").
func ParseRef(s string) (name, version string, err error) {
	name, version, _ = strings.Cut(s, ":")
	if err := ValidateName(name); err != nil {
		return "", "", err
	}
	if version != "" {
		if err := ValidateVersion(version); err != nil {
			return "", "", err
		}
	}
	return name, version, nil
}

// Sorted flattens a registry map into name then version order, so every
// listing (and the workflow's own iteration) is deterministic.
func Sorted(m map[string]map[string]Tool) []Tool {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Tool
	for _, n := range names {
		versions := make([]string, 0, len(m[n]))
		for v := range m[n] {
			versions = append(versions, v)
		}
		sort.Strings(versions)
		for _, v := range versions {
			out = append(out, m[n][v])
		}
	}
	return out
}
