// Package policy turns sandbox requests into Docker container configuration.
// It is pure: no Docker client, no I/O, no clock. Validation is the
// host-neutral exechost.Validator plus any Docker-only check here, so
// Provision, Restore and Exec validate identically and the host can refuse a
// request before creating anything.
package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentflow/agentflow/exechost"
)

// Labels the host sets on every sandbox. Requests may not set them.
const (
	LabelManaged   = "agentflow.managed"
	LabelExecution = "agentflow.execution"
	LabelOwner     = "agentflow.owner"
	LabelDeadline  = "agentflow.deadline" // unix seconds
	LabelImage     = "agentflow.image"
	// LabelPool marks a warm-pool sandbox (exechost/docker pool.go): its
	// value is the pool key. Such a sandbox's execution label names its
	// pool slot, not an execution: it is renamed to the execution's
	// container name when a Provision takes it.
	LabelPool = "agentflow.pool"
)

// Paths inside the sandbox.
const (
	WorkspaceDir = "/workspace"
	TmpDir       = "/tmp"
)

// Defaults for Config fields left zero.
const (
	DefaultUser     = "65532:65532"
	DefaultTmpBytes = 64 << 20
	DefaultShmBytes = 1 << 20
	MaxCheckpoints  = exechost.MaxCheckpoints
)

// Config is the operator's policy. The zero value is usable: numeric user
// 65532:65532, pinned images only, no resource ceilings.
type Config struct {
	// User is "uid:gid", numeric, non-root. Never a name: a name is resolved
	// through the image's /etc/passwd, which the image controls.
	User string
	// AllowUnpinnedImages accepts mutable references (tags). Off by default.
	AllowUnpinnedImages bool
	// Max bounds every request; a zero field means no ceiling.
	Max exechost.ResourceLimits
	// TmpBytes sizes the /tmp tmpfs (default 64 MiB). Tmpfs pages are
	// charged to the container's memory, so MemoryLimit adds it.
	TmpBytes int64
	// ShmBytes sizes /dev/shm (default 1 MiB).
	ShmBytes int64
	// GPUDriver is the device-request driver for GPUs ("" lets Docker pick).
	GPUDriver string
}

// Policy validates requests and builds container configuration.
type Policy struct {
	cfg      Config
	uid, gid int
	rules    exechost.Validator
}

// New checks cfg and fills defaults.
func New(cfg Config) (*Policy, error) {
	if cfg.User == "" {
		cfg.User = DefaultUser
	}
	uid, gid, err := parseUser(cfg.User)
	if err != nil {
		return nil, err
	}
	if cfg.TmpBytes == 0 {
		cfg.TmpBytes = DefaultTmpBytes
	}
	if cfg.ShmBytes == 0 {
		cfg.ShmBytes = DefaultShmBytes
	}
	if cfg.TmpBytes < 0 || cfg.ShmBytes < 0 {
		return nil, errors.New("policy config: negative tmpfs size")
	}
	rules := exechost.Validator{
		AllowUnpinnedImages: cfg.AllowUnpinnedImages,
		Max:                 cfg.Max,
		ReservedLabels:      []string{LabelManaged, LabelExecution, LabelOwner, LabelDeadline, LabelImage, LabelPool},
	}
	return &Policy{cfg: cfg, uid: uid, gid: gid, rules: rules}, nil
}

// User is the numeric "uid:gid" every process in the sandbox runs as.
func (p *Policy) User() string { return p.cfg.User }

func parseUser(u string) (uid, gid int, err error) {
	a, b, ok := strings.Cut(u, ":")
	if !ok {
		return 0, 0, fmt.Errorf("policy config: user %q: want numeric uid:gid", u)
	}
	uid, err1 := strconv.Atoi(a)
	gid, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || uid <= 0 || gid <= 0 || uid > 1<<31-2 || gid > 1<<31-2 {
		return 0, 0, fmt.Errorf("policy config: user %q: want numeric non-root uid:gid", u)
	}
	return uid, gid, nil
}

// ValidateProvision checks a whole provision request and returns every
// problem at once; each matches exechost.ErrPolicy. The rules are the
// host-neutral exechost.Validator's; Docker-only rules go here too.
func (p *Policy) ValidateProvision(req exechost.ProvisionRequest) error {
	return p.rules.ValidateProvision(req)
}

// ValidateExec checks one exec request (exechost.Validator).
func (p *Policy) ValidateExec(req exechost.ExecRequest) error {
	return p.rules.ValidateExec(req)
}

// CheckImageVolumes refuses images that declare VOLUMEs outside the tmpfs
// mounts the sandbox covers: Docker would back them with an anonymous host
// volume that escapes the disk limit and the read-only rootfs.
func CheckImageVolumes(volumes map[string]struct{}) error {
	var errs []error
	names := make([]string, 0, len(volumes))
	for v := range volumes {
		names = append(names, v)
	}
	sort.Strings(names)
	for _, v := range names {
		c := path.Clean(v)
		if c == WorkspaceDir || c == TmpDir {
			continue // covered by our tmpfs, which takes precedence
		}
		errs = append(errs, &exechost.PolicyError{Field: "image", Reason: fmt.Sprintf("declares VOLUME %s, which would escape the disk limit", v)})
	}
	return errors.Join(errs...)
}

// ContainerName derives a stable Docker name from an execution ID, so a
// retried Provision with the same ID collides with (and can replace) what
// an earlier attempt left instead of creating a duplicate.
func ContainerName(id exechost.ExecutionID) string {
	sum := sha256.Sum256([]byte(id))
	var b strings.Builder
	for _, r := range string(id) {
		if b.Len() >= 40 {
			break
		}
		if r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return "agentflow-" + b.String() + "-" + hex.EncodeToString(sum[:6])
}
