package docker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/system"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker/policy"
	"github.com/agentflow/agentflow/exechost/docker/runner"
)

// VersionClient is what the preflight asks the daemon about itself.
type VersionClient interface {
	Info(ctx context.Context) (system.Info, error)
	ServerVersion(ctx context.Context) (types.Version, error)
}

// PreflightOptions configure Host.Preflight.
type PreflightOptions struct {
	// Image runs the checks; it must provide /bin/sh and busybox-style
	// coreutils (default agentflow/base:latest).
	Image string
	// Labels are added to the preflight containers.
	Labels map[string]string
	// Weaken changes the sandbox configuration before it is created. Tests
	// use it to prove that each check fails when its protection is missing;
	// nothing else may set it.
	Weaken func(*policy.Spec)
	// SkipWorkdir leaves out the working-directory check (seven containers;
	// tests of the other checks skip it).
	SkipWorkdir bool
}

// PreflightCheck is the outcome of one functional check. A check whose
// protection cannot be observed under the host's runtime is Skipped (OK is
// false) and its Detail says why and what was seen; Err ignores it, the
// worker logs it as a warning.
type PreflightCheck struct {
	Name    string `json:"name"`
	OK      bool   `json:"ok"`
	Skipped bool   `json:"skipped,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// PreflightReport is what the daemon says about itself plus the checks.
type PreflightReport struct {
	DockerVersion     string `json:"docker_version"`
	KernelVersion     string `json:"kernel_version"`
	RuncVersion       string `json:"runc_version"`
	ContainerdVersion string `json:"containerd_version"`
	DefaultRuntime    string `json:"default_runtime"`
	// Runtime is the OCI runtime the checks (and this host's sandboxes)
	// ran under: Options.Runtime, else the daemon's default.
	Runtime string           `json:"runtime"`
	Checks  []PreflightCheck `json:"checks"`
}

// ErrPreflight: at least one check failed; the sandbox cannot be trusted
// on this daemon.
var ErrPreflight = errors.New("sandbox preflight failed")

// Err returns nil when every check passed, else ErrPreflight naming them.
func (r *PreflightReport) Err() error {
	var bad []string
	for _, c := range r.Checks {
		if !c.OK && !c.Skipped {
			bad = append(bad, c.Name+": "+c.Detail)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrPreflight, strings.Join(bad, "; "))
}

// Check returns the named check (nil if it was not run).
func (r *PreflightReport) Check(name string) *PreflightCheck {
	for i := range r.Checks {
		if r.Checks[i].Name == name {
			return &r.Checks[i]
		}
	}
	return nil
}

// Names of the preflight checks.
const (
	CheckWorkdirFD   = "workdir_proc_self_fd" // CVE-2024-21626 class
	CheckMaskedPaths = "masked_paths"
	CheckSeccomp     = "seccomp_profile"
	CheckNoNewPrivs  = "no_new_privs"
	CheckNoCaps      = "no_capabilities"
	CheckKeeperUID   = "keeper_uid"
	// CheckRuntimeKernel: the sandbox observably runs under the host's
	// runtime (gVisor's kernel under runsc, the host's under runc).
	CheckRuntimeKernel = "runtime_kernel"
)

// maskedPaths must read as empty (masked by /dev/null or an empty tmpfs) or
// not exist. These are the runtime's own defaults; the check makes sure
// this daemon really applies them.
var maskedPaths = []string{
	"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/scsi",
	"/proc/acpi", "/proc/latency_stats", "/proc/timer_stats", "/sys/firmware",
}

// Preflight runs benign functional checks for known sandbox escape classes
// in real containers built by the real policy, and reports the daemon's
// runc, containerd and kernel versions (for the log: distributions
// backport fixes, so versions alone prove nothing). An error means the
// checks could not run; failed checks are in the report (see Err).
func (h *Host) Preflight(ctx context.Context, opts PreflightOptions) (*PreflightReport, error) {
	if opts.Image == "" {
		opts.Image = "agentflow/base:latest"
	}
	rep := &PreflightReport{}
	if vc, ok := h.c.(VersionClient); ok {
		if info, err := vc.Info(ctx); err == nil {
			rep.KernelVersion, rep.DefaultRuntime = info.KernelVersion, info.DefaultRuntime
			rep.RuncVersion, rep.ContainerdVersion = info.RuncCommit.ID, info.ContainerdCommit.ID
		}
		if v, err := vc.ServerVersion(ctx); err == nil {
			rep.DockerVersion = v.Version
			for _, c := range v.Components {
				switch strings.ToLower(c.Name) {
				case "runc":
					rep.RuncVersion = c.Version + " (" + rep.RuncVersion + ")"
				case "containerd":
					rep.ContainerdVersion = c.Version + " (" + rep.ContainerdVersion + ")"
				}
			}
		}
	}
	rep.Runtime = h.runtime
	if rep.Runtime == "" {
		rep.Runtime = rep.DefaultRuntime
	}
	img, err := h.c.ImageInspect(ctx, opts.Image)
	if err != nil {
		return nil, fmt.Errorf("preflight image %s: %w", opts.Image, err)
	}
	if !opts.SkipWorkdir {
		rep.Checks = append(rep.Checks, h.checkWorkdirFD(ctx, img.ID, opts))
	}
	checks, err := h.checkInside(ctx, img.ID, rep.Runtime, opts)
	if err != nil {
		return nil, err
	}
	rep.Checks = append(rep.Checks, checks...)
	return rep, nil
}

// preflightSpec is what Provision would build on this host (Host.spec:
// the policy plus the host's runtime and its PIDs overhead), plus
// opts.Weaken.
func (h *Host) preflightSpec(imageID, name string, opts PreflightOptions) policy.Spec {
	labels := map[string]string{"agentflow.preflight": "1"}
	for k, v := range opts.Labels {
		labels[k] = v
	}
	req := exechost.ProvisionRequest{
		ExecutionID: exechost.ExecutionID("preflight/" + name + "/" + randomHex(6)),
		Image:       imageID,
		Network:     exechost.NetworkNone,
		Labels:      labels,
		Resources: exechost.ResourceLimits{NanoCPUs: 5e8, MemoryBytes: 64 << 20, DiskBytes: 8 << 20,
			Pids: 64, Runtime: 2 * time.Minute, MaxOutputBytes: 64 << 10}, // runsc counts its own threads: 32 does not start
	}
	spec := h.spec(req, policy.Meta{Owner: h.owner, ImageID: imageID, Deadline: time.Now().Add(req.Resources.Runtime)})
	if opts.Weaken != nil {
		opts.Weaken(&spec)
	}
	return spec
}

// checkWorkdirFD: a container whose working directory is /proc/self/fd/<n>
// must not start inside a directory of the host (runc leaked a host fd to
// PID 1 in CVE-2024-21626). Either the runtime refuses to start it, or the
// working directory is reachable from the container's own root.
func (h *Host) checkWorkdirFD(ctx context.Context, imageID string, opts PreflightOptions) PreflightCheck {
	type outcome struct {
		code    int64
		started bool
		err     error
	}
	const first, last = 3, 9
	var res [last + 1]outcome
	var wg sync.WaitGroup
	for fd := first; fd <= last; fd++ { // concurrently: seven containers at worker start
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec := h.preflightSpec(imageID, "workdir", opts)
			spec.Config.WorkingDir = fmt.Sprintf("/proc/self/fd/%d", fd)
			// Exit 0: the cwd resolves inside the container's root. 66: it does not.
			spec.Config.Entrypoint = []string{"/bin/sh", "-c",
				`p=$(readlink /proc/self/cwd); [ "$(stat -c %d:%i . 2>&1)" = "$(cd / && stat -c %d:%i "$p" 2>&1)" ] || exit 66`}
			spec.HostConfig.AutoRemove = false
			code, started, err := h.runOnce(ctx, spec)
			res[fd] = outcome{code, started, err}
		}()
	}
	wg.Wait()
	chk := PreflightCheck{Name: CheckWorkdirFD, OK: true}
	var notes []string
	for fd := first; fd <= last; fd++ {
		switch o := res[fd]; {
		case o.err != nil:
			return PreflightCheck{Name: CheckWorkdirFD, Detail: fmt.Sprintf("fd %d: %v", fd, o.err)}
		case !o.started:
			// The runtime refused: the safe outcome.
		case o.code != 0:
			chk.OK = false
			notes = append(notes, fmt.Sprintf("fd %d: working directory outside the container root (exit %d)", fd, o.code))
		}
	}
	chk.Detail = strings.Join(notes, "; ")
	return chk
}

// runOnce creates and starts spec, waits for PID 1 and removes the
// container. started is false when the daemon refused to create or start
// it (what a patched runtime does with a bad working directory).
func (h *Host) runOnce(ctx context.Context, spec policy.Spec) (code int64, started bool, err error) {
	resp, err := h.c.ContainerCreate(ctx, spec.Config, spec.HostConfig, spec.Network, nil, "")
	if err != nil {
		return 0, false, fmt.Errorf("create: %w", err)
	}
	defer h.remove(context.WithoutCancel(ctx), resp.ID)
	if err := h.c.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		h.log.Debug("preflight container refused to start", "error", err)
		return 0, false, nil
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	wc, ok := h.c.(interface {
		ContainerWait(ctx context.Context, containerID string, condition container.WaitCondition) (<-chan container.WaitResponse, <-chan error)
	})
	if !ok {
		return 0, true, errors.New("client cannot wait for containers")
	}
	okCh, errCh := wc.ContainerWait(wctx, resp.ID, container.WaitConditionNotRunning)
	select {
	case r := <-okCh:
		return r.StatusCode, true, nil
	case err := <-errCh:
		return 0, true, fmt.Errorf("wait for preflight container: %w", err)
	}
}

// checkInside provisions one sandbox the normal way and looks at it from
// the tool's side.
func (h *Host) checkInside(ctx context.Context, imageID, runtime string, opts PreflightOptions) ([]PreflightCheck, error) {
	spec := h.preflightSpec(imageID, "inside", opts)
	resp, err := h.c.ContainerCreate(ctx, spec.Config, spec.HostConfig, spec.Network, nil, "")
	if err != nil {
		return nil, fmt.Errorf("preflight: create sandbox: %w", err)
	}
	defer h.remove(context.WithoutCancel(ctx), resp.ID)
	if err := h.c.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return nil, fmt.Errorf("preflight: start sandbox: %w", err)
	}
	run := func(argv []string, stdin []byte) (int, string, error) {
		var out bytes.Buffer
		cmd := runner.Command{Argv: argv, User: h.policy.User(), WorkDir: policy.WorkspaceDir,
			Stdout: &out, Stderr: &out, MaxOutput: 64 << 10, Timeout: time.Minute}
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		res, err := h.run.Run(ctx, resp.ID, cmd)
		return res.ExitCode, out.String(), err
	}

	var script strings.Builder
	script.WriteString("grep -E '^(NoNewPrivs|Seccomp|Cap(Inh|Prm|Eff|Bnd|Amb)):' /proc/self/status\n")
	script.WriteString("echo \"Keeper: $(awk '/^Uid:/ {print $2}' /proc/1/status)\"\n")
	script.WriteString("echo \"KeeperSeccomp: $(awk '/^Seccomp:/ {print $2}' /proc/1/status)\"\n")
	// gVisor's kernel log starts with "Starting gVisor..."; the host's is
	// unreadable for the tool (dmesg_restrict) or says something else.
	script.WriteString("echo \"Dmesg: $(dmesg 2>/dev/null | head -n 1 | tr -d '\\r')\"\n")
	for _, p := range maskedPaths {
		// A masked file reads empty (/dev/null); a masked directory is an empty tmpfs.
		fmt.Fprintf(&script, "echo \"Masked %[1]s: $( (if [ -d %[1]s ]; then ls -A %[1]s; else head -c 1 %[1]s; fi) 2>/dev/null | wc -c)\"\n", p)
	}
	code, out, err := run([]string{"/bin/sh", "-c", script.String()}, nil)
	if err != nil {
		return nil, fmt.Errorf("preflight: inspect sandbox: %w", err)
	}
	if code != 0 {
		return nil, fmt.Errorf("preflight: inspect sandbox: exit %d: %s", code, out)
	}
	kv := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			// "Masked /proc/kcore: 0": the key keeps its path.
			kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}

	var checks []PreflightCheck
	add := func(name string, ok bool, format string, args ...any) {
		c := PreflightCheck{Name: name, OK: ok}
		if !ok {
			c.Detail = fmt.Sprintf(format, args...)
		}
		checks = append(checks, c)
	}
	// note explains a passing check whose weakening the tool could not
	// observe under this runtime: passed, but not silently.
	note := func(text string) {
		if c := &checks[len(checks)-1]; c.OK {
			c.Detail = text
		}
	}
	skip := func(name string, format string, args ...any) {
		checks = append(checks, PreflightCheck{Name: name, Skipped: true, Detail: fmt.Sprintf(format, args...)})
	}

	// Which kernel the tool talks to: the one fact that tells the runtimes
	// apart from inside, so the checks below know which rules apply.
	gvisor := strings.Contains(kv["Dmesg"], "gVisor")
	switch runtime {
	case "runsc":
		add(CheckRuntimeKernel, gvisor, "host runtime is runsc but the sandbox's kernel log does not show gVisor (dmesg: %q)", kv["Dmesg"])
	case "runc":
		add(CheckRuntimeKernel, !gvisor, "host runtime is runc but the sandbox runs on gVisor (dmesg: %q)", kv["Dmesg"])
	default:
		skip(CheckRuntimeKernel, "no observable fact known for runtime %q (gVisor seen: %v)", runtime, gvisor)
	}

	var unmasked []string
	for _, p := range maskedPaths {
		if v := kv["Masked "+p]; v != "0" {
			unmasked = append(unmasked, p)
		}
	}
	add(CheckMaskedPaths, len(unmasked) == 0, "readable from the sandbox: %s", strings.Join(unmasked, ", "))
	if gvisor {
		note("gVisor's /proc and /sys provide none of these paths (/sys/firmware is empty): unreadable with or without the masks")
	}

	// no_new_privs: asked of the kernel with prctl(PR_GET_NO_NEW_PRIVS);
	// the status line is the fallback off amd64 (gVisor has none).
	if nnp := prctlNoNewPrivsProbe(); nnp != nil {
		rc, out, err := runProbe(run, ".preflight-nnp", nnp)
		switch {
		case err != nil:
			return nil, fmt.Errorf("preflight: no_new_privs probe: %w", err)
		case gvisor:
			// runsc sets no_new_privs on every process docker exec starts,
			// whatever the container's config says: the tool has it, but a
			// missing no-new-privileges option would not show here.
			add(CheckNoNewPrivs, rc == "1", "prctl(PR_GET_NO_NEW_PRIVS) answered %s, want 1 (%s)", rc, out)
			note("gVisor: prctl(PR_GET_NO_NEW_PRIVS) answers 1 for the tool; runsc sets it on every exec'd process, so a missing no-new-privileges option would not show")
		default:
			add(CheckNoNewPrivs, rc == "1" && kv["NoNewPrivs"] == "1",
				"prctl(PR_GET_NO_NEW_PRIVS) answered %s, NoNewPrivs is %q, want 1 and 1", rc, kv["NoNewPrivs"])
		}
	} else if gvisor {
		skip(CheckNoNewPrivs, "gVisor's /proc/self/status has no NoNewPrivs line and the prctl probe is amd64-only")
	} else {
		add(CheckNoNewPrivs, kv["NoNewPrivs"] == "1", "NoNewPrivs is %q, want 1", kv["NoNewPrivs"])
	}

	var caps []string
	for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		v, seen := kv[k]
		if k == "CapAmb" && gvisor && !seen {
			continue // gVisor's status has no CapAmb line (docs/security/gvisor.md)
		}
		if strings.Trim(v, "0") != "" || v == "" {
			caps = append(caps, k+"="+v)
		}
	}
	add(CheckNoCaps, len(caps) == 0, "capability sets not empty: %s", strings.Join(caps, " "))
	add(CheckKeeperUID, kv["Keeper"] == strings.Split(policy.KeeperUser, ":")[0],
		"PID 1 runs as uid %q, want %s", kv["Keeper"], policy.KeeperUser)

	// The profile in effect is ours: io_uring_setup, which Docker's own
	// default allows on this daemon generation, answers EPERM.
	if elf := ioUringProbe(); elf != nil {
		rc, out, err := runProbe(run, ".preflight", elf)
		switch {
		case err != nil:
			return nil, fmt.Errorf("preflight: seccomp probe: %w", err)
		case rc == "":
			add(CheckSeccomp, false, "probe did not run: %s", out)
		case gvisor && rc != "1":
			// runsc applies the OCI profile (--oci-seccomp) to the
			// container's init only, not to processes docker exec starts:
			// the tool's system calls meet gVisor's Sentry, not the host
			// kernel, and no profile of ours. Nothing to tell ours from none.
			skip(CheckSeccomp, "not observable under gVisor: runsc does not apply the container's seccomp profile to processes started by docker exec "+
				"(the tool's: io_uring_setup answered errno %s, Seccomp mode %q; PID 1 Seccomp mode %q); the tool's system calls are served by gVisor's Sentry",
				rc, kv["Seccomp"], kv["KeeperSeccomp"])
		default:
			add(CheckSeccomp, rc == "1" && kv["Seccomp"] == "2",
				"io_uring_setup answered errno %s (want 1, EPERM, from agentflow's profile); Seccomp mode %q", rc, kv["Seccomp"])
		}
	} else if gvisor && kv["Seccomp"] != "2" {
		skip(CheckSeccomp, "not observable under gVisor: processes started by docker exec report Seccomp mode %q", kv["Seccomp"])
	} else {
		add(CheckSeccomp, kv["Seccomp"] == "2", "no seccomp filter (Seccomp mode %q)", kv["Seccomp"])
	}
	return checks, nil
}

// runProbe copies a probe binary into the workspace, runs it as the tool
// and returns its exit code as text ("" when the probe did not run; out
// then says why).
func runProbe(run func([]string, []byte) (int, string, error), name string, elf []byte) (rc, out string, err error) {
	code, out, err := run([]string{"/bin/sh", "-c", "cat > " + name + " && chmod 700 " + name + " && ./" + name + "; echo \"rc=$?\"; rm -f " + name}, elf)
	if err != nil {
		return "", out, err
	}
	if code != 0 {
		return "", fmt.Sprintf("exit %d: %s", code, out), nil
	}
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "rc=")), out, nil
}

// ioUringProbe is a 144-byte static x86-64 ELF that calls
// io_uring_setup(1, NULL) and exits with the errno it got (EPERM = 1 under
// agentflow's profile; EFAULT or ENOSYS without it). Hand-assembled so
// the preflight needs no image of its own. nil on other architectures.
func ioUringProbe() []byte {
	if !isAMD64 {
		return nil
	}
	code := []byte{
		0xb8, 0xa9, 0x01, 0x00, 0x00, // mov eax, 425 (io_uring_setup)
		0xbf, 0x01, 0x00, 0x00, 0x00, // mov edi, 1
		0x31, 0xf6, // xor esi, esi
		0x0f, 0x05, // syscall
		0xf7, 0xd8, // neg eax
		0x89, 0xc7, // mov edi, eax
		0xb8, 0x3c, 0x00, 0x00, 0x00, // mov eax, 60 (exit)
		0x0f, 0x05, // syscall
	}
	return elfProbe(code)
}

// prctlNoNewPrivsProbe is the same kind of ELF: it exits with what
// prctl(PR_GET_NO_NEW_PRIVS) returns (1: set, 0: not set). nil on other
// architectures.
func prctlNoNewPrivsProbe() []byte {
	if !isAMD64 {
		return nil
	}
	return elfProbe([]byte{
		0xb8, 0x9d, 0x00, 0x00, 0x00, // mov eax, 157 (prctl)
		0xbf, 0x27, 0x00, 0x00, 0x00, // mov edi, 39 (PR_GET_NO_NEW_PRIVS)
		0x31, 0xf6, // xor esi, esi
		0x0f, 0x05, // syscall
		0x89, 0xc7, // mov edi, eax
		0xb8, 0x3c, 0x00, 0x00, 0x00, // mov eax, 60 (exit)
		0x0f, 0x05, // syscall
	})
}

// elfProbe wraps x86-64 code in a minimal static ELF (one PT_LOAD).
func elfProbe(code []byte) []byte {
	const base, hdr = 0x400000, 64 + 56
	size := uint64(hdr + len(code))
	b := new(bytes.Buffer)
	w := func(v any) { _ = binary.Write(b, binary.LittleEndian, v) }
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	w(uint16(2))          // ET_EXEC
	w(uint16(0x3e))       // x86-64
	w(uint32(1))          // version
	w(uint64(base + hdr)) // entry
	w(uint64(64))         // program headers follow the ELF header
	w(uint64(0))          // no section headers
	w(uint32(0))          // flags
	w(uint16(64))         // ELF header size
	w(uint16(56))         // program header size
	w(uint16(1))          // one program header
	w(uint16(0))
	w(uint16(0))
	w(uint16(0))
	w(uint32(1))    // PT_LOAD
	w(uint32(5))    // R+X
	w(uint64(0))    // offset
	w(uint64(base)) // vaddr
	w(uint64(base)) // paddr
	w(size)         // filesz
	w(size)         // memsz
	w(uint64(0x1000))
	b.Write(code)
	return b.Bytes()
}
