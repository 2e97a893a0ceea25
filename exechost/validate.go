package exechost

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Validator checks requests against the host-neutral rules (rules.go,
// envrules.go). Every ExecutionHost runs it before it creates anything; a
// host adds only the rules of its own mechanism. The zero value is usable:
// pinned images only, no ceilings, no reserved labels.
type Validator struct {
	// AllowUnpinnedImages accepts mutable references (tags). Off by default.
	AllowUnpinnedImages bool
	// Max bounds every request; a zero field means no ceiling.
	Max ResourceLimits
	// ReservedLabels are label keys the host sets itself; requests may not.
	ReservedLabels []string
}

var labelKeyRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$`) })

// problems collects every violation of one request.
type problems []error

func (ps *problems) add(field, format string, args ...any) {
	*ps = append(*ps, &PolicyError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

func (ps problems) err() error { return errors.Join(ps...) }

// ValidateProvision checks a whole provision request and returns every
// problem at once, each a *PolicyError (so matching ErrPolicy).
func (v Validator) ValidateProvision(req ProvisionRequest) error {
	var ps problems
	checkExecutionID(&ps, req.ExecutionID)
	if err := CheckImageRef(req.Image, v.AllowUnpinnedImages); err != nil {
		ps.add("image", "%v", err)
	}
	v.checkResources(&ps, req.Resources)
	if req.Network != "" && req.Network != NetworkNone && req.Network != NetworkEgress {
		ps.add("network", "mode %q not supported: only %q or %q", req.Network, NetworkNone, NetworkEgress)
	}
	checkEgress(&ps, req.Network, req.Egress)
	checkEnv(&ps, "env", req.Env, false)
	v.checkLabels(&ps, req.Labels)
	checkWorkspace(&ps, req.Workspace)
	return ps.err()
}

// ValidateExec checks one exec request.
func (v Validator) ValidateExec(req ExecRequest) error {
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

func checkExecutionID(ps *problems, id ExecutionID) {
	s := string(id)
	switch {
	case s == "":
		ps.add("execution_id", "empty")
	case len(s) > MaxExecutionID:
		ps.add("execution_id", "longer than %d bytes", MaxExecutionID)
	case !utf8.ValidString(s):
		ps.add("execution_id", "not UTF-8")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		ps.add("execution_id", "contains control characters")
	}
}

func (v Validator) checkResources(ps *problems, r ResourceLimits) {
	max := v.Max
	check := func(field string, val, min, ceiling int64, unit string) {
		switch {
		case val <= 0:
			ps.add("resources."+field, "required")
		case val < min:
			ps.add("resources."+field, "%d%s below minimum %d%s", val, unit, min, unit)
		case ceiling > 0 && val > ceiling:
			ps.add("resources."+field, "%d%s above maximum %d%s", val, unit, ceiling, unit)
		}
	}
	check("cpu", r.NanoCPUs, MinNanoCPUs, max.NanoCPUs, " nanoCPUs")
	check("memory", r.MemoryBytes, MinMemoryBytes, max.MemoryBytes, " bytes")
	check("disk", r.DiskBytes, MinDiskBytes, max.DiskBytes, " bytes")
	check("pids", r.Pids, MinPids, max.Pids, "")
	check("max_output", r.MaxOutputBytes, MinMaxOutputBytes, max.MaxOutputBytes, " bytes")
	check("runtime", int64(r.Runtime), int64(time.Second), int64(max.Runtime), "ns")
	switch {
	case r.GPUs < -1:
		ps.add("resources.gpu", "%d: want -1 (all), 0 or a device count", r.GPUs)
	case max.GPUs > 0 && (r.GPUs == -1 || r.GPUs > max.GPUs):
		ps.add("resources.gpu", "%d above maximum %d", r.GPUs, max.GPUs)
	}
	if len(r.GPUDevices) == 0 {
		return
	}
	if len(r.GPUDevices) != r.GPUs {
		ps.add("resources.gpu_devices", "%d devices for gpu %d: want exactly gpu devices", len(r.GPUDevices), r.GPUs)
	}
	seen := map[string]bool{}
	for i, d := range r.GPUDevices {
		if err := CheckGPUDevice(d); err != nil {
			ps.add(fmt.Sprintf("resources.gpu_devices[%d]", i), "%v", err)
		} else if seen[d] {
			ps.add(fmt.Sprintf("resources.gpu_devices[%d]", i), "device %s listed twice", d)
		}
		seen[d] = true
	}
}

// checkEnv validates names and values. Secrets may (must) look secret and
// may hold credential-shaped values; plain env may not.
func checkEnv(ps *problems, field string, env map[string]string, secrets bool) {
	total := 0
	for k, val := range env {
		total += len(k) + len(val) + 2
		if err := CheckEnvName(k, secrets); err != nil {
			ps.add(field+"."+k, "%v", err)
		}
		switch {
		case secrets && strings.IndexByte(val, 0) >= 0:
			ps.add(field+"."+k, "value contains NUL")
		case !secrets:
			if err := CheckEnvValue(val); err != nil {
				ps.add(field+"."+k, "%v", err)
			}
		}
	}
	if total > MaxEnvBytes {
		ps.add(field, "larger than %d bytes", MaxEnvBytes)
	}
}

func (v Validator) checkLabels(ps *problems, labels map[string]string) {
	if len(labels) > MaxLabels {
		ps.add("labels", "more than %d", MaxLabels)
	}
	for k, val := range labels {
		switch {
		case !labelKeyRe().MatchString(k):
			ps.add("labels."+k, "invalid key")
		case v.reserved(k):
			ps.add("labels."+k, "reserved for the host")
		}
		if len(val) > 1024 || strings.IndexByte(val, 0) >= 0 {
			ps.add("labels."+k, "invalid value")
		}
	}
}

func (v Validator) reserved(k string) bool {
	for _, r := range v.ReservedLabels {
		if k == r {
			return true
		}
	}
	return false
}

func checkWorkspace(ps *problems, ws Workspace) {
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
		if err := CheckCheckpointID(id); err != nil {
			ps.add(fmt.Sprintf("workspace.checkpoints[%d]", i), "invalid id %q", id)
		}
	}
}
