package docker

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/docker/docker/api/types/system"
)

// InfoClient is the part of the Docker client CheckRuntime needs.
type InfoClient interface {
	Info(ctx context.Context) (system.Info, error)
}

// CheckRuntime refuses an OCI runtime the daemon does not have registered
// (`docker info` Runtimes), with the list it does have and how to register
// gVisor. "" (the daemon default) always passes. A worker calls it at start
// so a typo or a missing runsc fails there, not on every step.
func CheckRuntime(ctx context.Context, c InfoClient, name string) error {
	if name == "" {
		return nil
	}
	info, err := c.Info(ctx)
	if err != nil {
		return fmt.Errorf("docker info: %w", err)
	}
	return runtimeRegistered(info, name)
}

func runtimeRegistered(info system.Info, name string) error {
	if _, ok := info.Runtimes[name]; ok {
		return nil
	}
	have := make([]string, 0, len(info.Runtimes))
	for n := range info.Runtimes {
		have = append(have, n)
	}
	sort.Strings(have)
	hint := ""
	if name == "runsc" {
		hint = "; install and register gVisor with scripts/install-runsc.sh (docs/security/gvisor.md)"
	}
	return fmt.Errorf("sandbox runtime %q is not registered with the Docker daemon (it has: %s)%s", name, strings.Join(have, ", "), hint)
}

// RunscPidsOverhead is added to a sandbox's PIDs limit under gVisor. The
// pids cgroup of a runsc container counts gVisor's own Sentry and gofer
// threads (~65 on an idle sandbox with one exec, measured on the ptrace
// platform), so a limit meant for the tool (policy minimum 32, default 64
// in tests) would kill the whole sandbox on its first pipeline: the Sentry
// cannot create a thread and exits. The tool keeps a bounded budget of its
// own above that overhead (docs/security/gvisor.md).
const RunscPidsOverhead = 128

func withRuntimePids(runtime string, limit *int64) *int64 {
	if runtime != "runsc" || limit == nil || *limit <= 0 {
		return limit
	}
	v := *limit + RunscPidsOverhead
	return &v
}

// EgressUnavailable says why sandboxes under runtime ("" = the daemon's
// default) cannot have egress, or "" when they can. A runtime registered
// without networking (gVisor with --network=none, which
// scripts/install-runsc.sh registers on machines whose netstack gVisor
// cannot drive) gives a sandbox no interface to reach its proxy: egress
// there is refused with this reason, never silently run under another
// runtime.
func EgressUnavailable(ctx context.Context, c InfoClient, runtime string) (string, error) {
	info, err := c.Info(ctx)
	if err != nil {
		return "", fmt.Errorf("docker info: %w", err)
	}
	return egressUnavailable(info, runtime), nil
}

func egressUnavailable(info system.Info, name string) string {
	if name == "" {
		name = info.DefaultRuntime
	}
	rt, ok := info.Runtimes[name]
	if !ok {
		return ""
	}
	args := rt.Args
	for i, a := range args {
		if a == "--network=none" || a == "-network=none" || (a == "--network" || a == "-network") && i+1 < len(args) && args[i+1] == "none" {
			return fmt.Sprintf("sandbox runtime %q is registered with %s: its sandboxes have no network, so egress cannot be served under it (run steps with egress on a worker with runc, or register %s with networking)", name, "--network=none", name)
		}
	}
	return ""
}
