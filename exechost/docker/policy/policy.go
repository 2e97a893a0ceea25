// Package policy turns sandbox requests into Docker container configuration.
// It is pure: no Docker client, no I/O, no clock. Every check lives here so
// Provision, Restore and Exec validate identically and the host can refuse a
// request before creating anything.
package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/exechost/gitsource"
)

// Labels the host sets on every sandbox. Requests may not set them.
const (
	LabelManaged   = "agentflow.managed"
	LabelExecution = "agentflow.execution"
	LabelOwner     = "agentflow.owner"
	LabelDeadline  = "agentflow.deadline" // unix seconds
	LabelImage     = "agentflow.image"
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
	MaxCheckpoints  = 32
	maxEnvBytes     = 64 << 10
	maxLabels       = 64
	maxIDBytes      = 200
	minMemoryBytes  = 8 << 20 // Docker refuses less than 6 MiB; keep a margin
	minPids         = 8       // sleep (PID 1) + sh + tar + a tool
	minNanoCPUs     = 1e7     // 0.01 CPU, Docker's own floor
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
	return &Policy{cfg: cfg, uid: uid, gid: gid}, nil
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

// problems collects every policy violation of one request.
type problems []error

func (ps *problems) add(field, format string, args ...any) {
	*ps = append(*ps, &exechost.PolicyError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

func (ps problems) err() error { return errors.Join(ps...) }

var (
	// Compiled on first use: every agentctl start (validate must stay fast)
	// would otherwise pay for these at package init.
	envNamePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
	// secretName matches names that look like they carry a credential.
	// Matched on the upper-cased name with separators removed, so
	// "apiKey", "API_KEY" and "X_APIKEY" are all caught.
	secretName = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|APIKEY|CREDENTIAL|PRIVATEKEY|ACCESSKEY`)
	})
	digestRef       = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}$`) })
	imageID         = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sha256:[0-9a-f]{64}$`) })
	labelKeyPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$`) })
)

// LooksSecret reports whether an environment variable name looks like it
// holds a token, secret, password, API key or credential.
func LooksSecret(name string) bool {
	n := strings.ToUpper(strings.ReplaceAll(name, "_", ""))
	return secretName().MatchString(n)
}

// IsPinned reports whether ref names an immutable image: "repo@sha256:…" or
// a local image ID "sha256:…".
func IsPinned(ref string) bool { return imageID().MatchString(ref) || digestRef().MatchString(ref) }

// ValidateProvision checks a whole provision request and returns every
// problem at once; each matches exechost.ErrPolicy.
func (p *Policy) ValidateProvision(req exechost.ProvisionRequest) error {
	var ps problems
	p.checkExecutionID(&ps, req.ExecutionID)
	p.checkImage(&ps, req.Image)
	p.checkResources(&ps, req.Resources)
	if req.Network != "" && req.Network != exechost.NetworkNone {
		ps.add("network", "mode %q not supported: only %q", req.Network, exechost.NetworkNone)
	}
	checkEnv(&ps, "env", req.Env, false)
	checkLabels(&ps, req.Labels)
	checkWorkspace(&ps, req.Workspace)
	return ps.err()
}

// ValidateExec checks one exec request.
func (p *Policy) ValidateExec(req exechost.ExecRequest) error {
	var ps problems
	if len(req.Command) == 0 || req.Command[0] == "" {
		ps.add("command", "empty")
	}
	for i, a := range req.Command {
		if strings.IndexByte(a, 0) >= 0 {
			ps.add(fmt.Sprintf("command[%d]", i), "contains NUL")
		}
	}
	if req.Timeout < 0 {
		ps.add("timeout", "negative")
	}
	checkEnv(&ps, "env", req.Env, false)
	checkEnv(&ps, "secrets", req.Secrets, true)
	for k := range req.Secrets {
		if _, dup := req.Env[k]; dup {
			ps.add("secrets."+k, "also set as plain env")
		}
	}
	return ps.err()
}

func (p *Policy) checkExecutionID(ps *problems, id exechost.ExecutionID) {
	s := string(id)
	switch {
	case s == "":
		ps.add("execution_id", "empty")
	case len(s) > maxIDBytes:
		ps.add("execution_id", "longer than %d bytes", maxIDBytes)
	case !utf8.ValidString(s):
		ps.add("execution_id", "not UTF-8")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		ps.add("execution_id", "contains control characters")
	}
}

func (p *Policy) checkImage(ps *problems, ref string) {
	switch {
	case ref == "":
		ps.add("image", "empty")
	case IsPinned(ref):
	case !p.cfg.AllowUnpinnedImages:
		ps.add("image", "%q is not pinned: use repo@sha256:<digest> or a local image ID sha256:<hex>", ref)
	case strings.HasPrefix(ref, "-") || strings.ContainsAny(ref, " \t\n\x00"):
		ps.add("image", "%q is not an image reference", ref)
	}
}

func (p *Policy) checkResources(ps *problems, r exechost.ResourceLimits) {
	max := p.cfg.Max
	check := func(field string, v, min, ceiling int64, unit string) {
		switch {
		case v <= 0:
			ps.add("resources."+field, "required")
		case v < min:
			ps.add("resources."+field, "%d%s below minimum %d%s", v, unit, min, unit)
		case ceiling > 0 && v > ceiling:
			ps.add("resources."+field, "%d%s above maximum %d%s", v, unit, ceiling, unit)
		}
	}
	check("cpu", r.NanoCPUs, minNanoCPUs, max.NanoCPUs, " nanoCPUs")
	check("memory", r.MemoryBytes, minMemoryBytes, max.MemoryBytes, " bytes")
	check("disk", r.DiskBytes, 1<<20, max.DiskBytes, " bytes")
	check("pids", r.Pids, minPids, max.Pids, "")
	check("max_output", r.MaxOutputBytes, 1, max.MaxOutputBytes, " bytes")
	check("runtime", int64(r.Runtime), int64(time.Second), int64(max.Runtime), "ns")
	switch {
	case r.GPUs < -1:
		ps.add("resources.gpu", "%d: want -1 (all), 0 or a device count", r.GPUs)
	case max.GPUs > 0 && (r.GPUs == -1 || r.GPUs > max.GPUs):
		ps.add("resources.gpu", "%d above maximum %d", r.GPUs, max.GPUs)
	}
}

// checkEnv validates names and values. Secrets may (must) look secret;
// plain env must not.
func checkEnv(ps *problems, field string, env map[string]string, secrets bool) {
	total := 0
	for k, v := range env {
		total += len(k) + len(v) + 2
		switch {
		case !envNamePattern().MatchString(k):
			ps.add(field+"."+k, "invalid name")
		case !secrets && LooksSecret(k):
			ps.add(field+"."+k, "name looks like a secret: pass it in ExecRequest.Secrets")
		}
		if strings.IndexByte(v, 0) >= 0 {
			ps.add(field+"."+k, "value contains NUL")
		}
	}
	if total > maxEnvBytes {
		ps.add(field, "larger than %d bytes", maxEnvBytes)
	}
}

func checkLabels(ps *problems, labels map[string]string) {
	if len(labels) > maxLabels {
		ps.add("labels", "more than %d", maxLabels)
	}
	for k, v := range labels {
		switch {
		case !labelKeyPattern().MatchString(k):
			ps.add("labels."+k, "invalid key")
		case isReservedLabel(k):
			ps.add("labels."+k, "reserved for the host")
		}
		if len(v) > 1024 || strings.IndexByte(v, 0) >= 0 {
			ps.add("labels."+k, "invalid value")
		}
	}
}

func isReservedLabel(k string) bool {
	switch k {
	case LabelManaged, LabelExecution, LabelOwner, LabelDeadline, LabelImage:
		return true
	}
	return false
}

func checkWorkspace(ps *problems, ws exechost.Workspace) {
	if ws.Git != nil && len(ws.Checkpoints) > 0 {
		ps.add("workspace", "git and checkpoints are mutually exclusive")
	}
	if g := ws.Git; g != nil {
		if !path.IsAbs(g.RepositoryPath) || path.Clean(g.RepositoryPath) != g.RepositoryPath {
			ps.add("workspace.git.repository", "%q: want a clean absolute path", g.RepositoryPath)
		}
		if err := CheckRevision(g.Revision); err != nil {
			ps.add("workspace.git.revision", "%v", err)
		}
	}
	if len(ws.Checkpoints) > MaxCheckpoints {
		ps.add("workspace.checkpoints", "more than %d layers", MaxCheckpoints)
	}
	for i, id := range ws.Checkpoints {
		if err := checkpoint.ValidID(id); err != nil {
			ps.add(fmt.Sprintf("workspace.checkpoints[%d]", i), "invalid id %q", id)
		}
	}
}

// CheckRevision is the git revision rule (gitsource.CheckRevision): ref
// names and object IDs with ~N/^N only, checked before git ever runs.
func CheckRevision(rev string) error { return gitsource.CheckRevision(rev) }

// CheckImageVolumes refuses images that declare VOLUMEs outside the tmpfs
// mounts the sandbox covers: Docker would back them with an anonymous host
// volume that escapes the disk limit and the read-only rootfs.
func CheckImageVolumes(volumes map[string]struct{}) error {
	var ps problems
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
		ps.add("image", "declares VOLUME %s, which would escape the disk limit", v)
	}
	return ps.err()
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
