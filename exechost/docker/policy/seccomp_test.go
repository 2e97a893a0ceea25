package policy

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// The profile agentflow applies (seccomp.json) is derived from moby's
// default profile, vendored unchanged in testdata (github.com/moby/profiles/seccomp
// v0.1.0, default.json, Apache-2.0, sha256 01536f1d…). deriveSeccomp is the
// whole derivation; TestSeccompProfileIsDerived fails when seccomp.json
// drifts from it. Regenerate with:
//
//	go test ./exechost/docker/policy -run TestSeccompProfileIsDerived -update-seccomp
var updateSeccomp = flag.Bool("update-seccomp", false, "rewrite seccomp.json from the vendored moby profile")

const mobyProfile = "testdata/moby-seccomp-default-v0.1.0.json"

type scProfile struct {
	DefaultAction   string      `json:"defaultAction"`
	DefaultErrnoRet *uint       `json:"defaultErrnoRet,omitempty"`
	ArchMap         []scArchMap `json:"archMap"`
	Syscalls        []scRule    `json:"syscalls"`
}

type scArchMap struct {
	Architecture     string   `json:"architecture"`
	SubArchitectures []string `json:"subArchitectures"`
}

type scRule struct {
	Names    []string  `json:"names"`
	Comment  string    `json:"comment,omitempty"`
	Action   string    `json:"action"`
	ErrnoRet *uint     `json:"errnoRet,omitempty"`
	Args     []scArg   `json:"args,omitempty"`
	Includes *scFilter `json:"includes,omitempty"`
	Excludes *scFilter `json:"excludes,omitempty"`
}

type scArg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo,omitempty"`
	Op       string `json:"op"`
}

type scFilter struct {
	Caps      []string `json:"caps,omitempty"`
	Arches    []string `json:"arches,omitempty"`
	MinKernel string   `json:"minKernel,omitempty"`
}

// deniedSyscalls are refused although moby's default allows them (some only
// on newer kernels or with a capability). docs/security/sandbox-kernel.md
// says why for each.
var deniedSyscalls = []string{
	// io_uring: a long line of kernel privilege escalations; also bypasses
	// seccomp for the operations it performs.
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	// tracing and cross-process memory access
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
	// kernel attack surface with a history of exploits
	"userfaultfd", "bpf", "perf_event_open", "keyctl", "add_key", "request_key",
	// namespaces (clone's namespace flags are filtered by the clone rule;
	// clone3 answers ENOSYS so libc falls back to clone)
	"unshare", "setns",
	// the mount family
	"mount", "umount", "umount2", "mount_setattr", "fsopen", "fsmount", "fsconfig", "fspick",
	"move_mount", "open_tree", "pivot_root", "listmount", "statmount", "chroot",
	// kernel code and reboot
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
	// file handles bypass path permissions (the "shocker" escape)
	"open_by_handle_at", "name_to_handle_at",
}

// deriveSeccomp turns moby's default into ours: every rule that only
// applies when the container holds a capability is dropped (sandboxes never
// do), so are rules gated on a kernel version (they allow ptrace and
// process_vm_*), capability exclusions are removed (the namespace-flag filter
// on clone and clone3's ENOSYS then always apply), and deniedSyscalls leave
// every allow rule.
func deriveSeccomp(in scProfile) scProfile {
	out := in
	out.Syscalls = nil
	for _, r := range in.Syscalls {
		if r.Includes != nil && (len(r.Includes.Caps) > 0 || r.Includes.MinKernel != "") {
			continue
		}
		if r.Excludes != nil {
			ex := *r.Excludes
			ex.Caps = nil
			r.Excludes = &ex
			if len(ex.Arches) == 0 && ex.MinKernel == "" {
				r.Excludes = nil
			}
		}
		if r.Action == "SCMP_ACT_ALLOW" {
			r.Names = slices.DeleteFunc(slices.Clone(r.Names), func(n string) bool { return slices.Contains(deniedSyscalls, n) })
			if len(r.Names) == 0 {
				continue
			}
		}
		out.Syscalls = append(out.Syscalls, r)
	}
	return out
}

func decodeProfile(t *testing.T, b []byte) scProfile {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p scProfile
	require.NoError(t, dec.Decode(&p))
	return p
}

func TestSeccompProfileIsDerived(t *testing.T) {
	upstream, err := os.ReadFile(mobyProfile)
	require.NoError(t, err)
	want, err := json.MarshalIndent(deriveSeccomp(decodeProfile(t, upstream)), "", "\t")
	require.NoError(t, err)
	want = append(want, '\n')
	if *updateSeccomp {
		require.NoError(t, os.WriteFile("seccomp.json", want, 0o644))
	}
	require.Equal(t, string(want), string(seccompProfile), "seccomp.json is not derived from %s: rerun with -update-seccomp", mobyProfile)
}

func TestSeccompProfileRefuses(t *testing.T) {
	p := decodeProfile(t, seccompProfile)
	require.Equal(t, "SCMP_ACT_ERRNO", p.DefaultAction, "anything not listed is refused")
	allowed := map[string]bool{}
	for _, r := range p.Syscalls {
		require.Nil(t, r.Includes.capsOrNil(), "no rule may depend on a capability: %v", r.Names)
		if r.Action == "SCMP_ACT_ALLOW" && len(r.Args) == 0 && (r.Includes == nil || len(r.Includes.Arches) == 0) {
			for _, n := range r.Names {
				allowed[n] = true
			}
		}
		if r.Action == "SCMP_ACT_ALLOW" {
			for _, n := range r.Names {
				require.NotContains(t, deniedSyscalls, n)
			}
		}
	}
	for _, n := range []string{"io_uring_setup", "ptrace", "unshare", "setns", "mount", "bpf", "keyctl", "clone3", "clone", "personality", "socket"} {
		require.False(t, allowed[n], "%s must not be allowed unconditionally", n)
	}
	for _, n := range []string{"read", "write", "execve", "openat", "mmap", "futex", "exit_group", "wait4", "kill"} {
		require.True(t, allowed[n], "%s is needed by ordinary tools", n)
	}
	// clone is allowed only without namespace flags; clone3 answers ENOSYS.
	var cloneMasked, clone3NoSys bool
	for _, r := range p.Syscalls {
		if slices.Equal(r.Names, []string{"clone"}) && r.Excludes != nil && len(r.Args) == 1 && r.Args[0].Op == "SCMP_CMP_MASKED_EQ" && r.Args[0].Index == 0 {
			cloneMasked = r.Args[0].Value == 0x7E020000 && r.Excludes.Caps == nil
		}
		if slices.Equal(r.Names, []string{"clone3"}) && r.ErrnoRet != nil {
			clone3NoSys = *r.ErrnoRet == 38 && r.Excludes == nil && r.Includes == nil
		}
	}
	require.True(t, cloneMasked, "clone must carry the namespace-flag mask for every capability set")
	require.True(t, clone3NoSys, "clone3 must answer ENOSYS unconditionally")
}

func (f *scFilter) capsOrNil() []string {
	if f == nil {
		return nil
	}
	return f.Caps
}
