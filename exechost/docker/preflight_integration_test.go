//go:build integration

package docker_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/exechost/docker/policy"
)

var allChecks = []string{docker.CheckRuntimeKernel, docker.CheckWorkdirFD, docker.CheckMaskedPaths, docker.CheckSeccomp,
	docker.CheckNoNewPrivs, docker.CheckNoCaps, docker.CheckKeeperUID}

// skippedUnder is the checks that cannot be observed under the pass's
// runtime (docs/security/gvisor.md), each with a phrase its Detail must say.
func skippedUnder() map[string]string {
	if gVisor() {
		// runsc applies the OCI seccomp profile to the container's init
		// only, never to processes docker exec starts (the tool's).
		return map[string]string{docker.CheckSeccomp: "not observable under gVisor"}
	}
	return map[string]string{}
}

func TestPreflightPassesOnThisDaemon(t *testing.T) {
	e := setup(t)
	rep, err := e.host.Preflight(t.Context(), docker.PreflightOptions{Labels: testLabels})
	require.NoError(t, err)
	require.NoError(t, rep.Err(), "%+v", rep.Checks)
	require.Equal(t, sandboxRuntime, rep.Runtime)
	skipped := skippedUnder()
	for _, n := range allChecks {
		c := rep.Check(n)
		require.NotNil(t, c, "check %s ran", n)
		if why, ok := skipped[n]; ok {
			require.True(t, c.Skipped, "%s is skipped under %s: %+v", n, sandboxRuntime, c)
			require.False(t, c.OK, "a skipped check never passes")
			require.Contains(t, c.Detail, why)
			t.Logf("%s skipped under %s: %s", n, sandboxRuntime, c.Detail)
			continue
		}
		require.False(t, c.Skipped, "%s really runs under %s: %s", n, sandboxRuntime, c.Detail)
		require.True(t, c.OK, "%s: %s", n, c.Detail)
		if gVisor() && (n == docker.CheckMaskedPaths || n == docker.CheckNoNewPrivs) {
			require.Contains(t, c.Detail, "gVisor", "passes with a note on what gVisor cannot show")
		}
	}
	require.Len(t, rep.Checks, len(allChecks))
	require.NotEmpty(t, rep.KernelVersion)
	require.NotEmpty(t, rep.DockerVersion)
	require.NotEmpty(t, rep.RuncVersion)
	require.NotEmpty(t, rep.ContainerdVersion)
}

// TestPreflightCatchesWeakenedPolicy: each check fails when the protection
// it stands for is taken away, and only the matching one. Under gVisor a
// weakening the tool cannot observe is stated per case (gvisor).
func TestPreflightCatchesWeakenedPolicy(t *testing.T) {
	tests := []struct {
		name   string
		weaken func(*policy.Spec)
		fails  string
		// gvisor: what fails under runsc when it differs from fails ("":
		// nothing fails), and why.
		gvisor, why string
	}{
		{name: "daemon's default seccomp instead of ours", fails: docker.CheckSeccomp, weaken: func(s *policy.Spec) {
			s.HostConfig.SecurityOpt = []string{"no-new-privileges"}
		}, why: "the profile never reaches exec'd processes: the seccomp check is skipped"},
		{name: "seccomp unconfined", fails: docker.CheckSeccomp, weaken: func(s *policy.Spec) {
			s.HostConfig.SecurityOpt = []string{"no-new-privileges", "seccomp=unconfined"}
		}, why: "the profile never reaches exec'd processes: the seccomp check is skipped"},
		{name: "a capability added back", fails: docker.CheckNoCaps, gvisor: docker.CheckNoCaps, weaken: func(s *policy.Spec) {
			s.HostConfig.CapAdd = []string{"SYS_PTRACE"}
		}},
		{name: "no-new-privileges off", fails: docker.CheckNoNewPrivs, weaken: func(s *policy.Spec) {
			s.HostConfig.SecurityOpt = s.HostConfig.SecurityOpt[1:]
		}, why: "runsc sets no_new_privs on every exec'd process: the tool still has it"},
		{name: "keeper runs as the tool", fails: docker.CheckKeeperUID, gvisor: docker.CheckKeeperUID, weaken: func(s *policy.Spec) {
			s.Config.User = policy.DefaultUser
		}},
		{name: "proc paths unmasked", fails: docker.CheckMaskedPaths, weaken: func(s *policy.Spec) {
			s.HostConfig.MaskedPaths = []string{"/proc/asound"}
		}, why: "gVisor provides none of the masked paths: the tool cannot read them with or without masks"},
	}
	e := setup(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := e.host.Preflight(t.Context(), docker.PreflightOptions{Labels: testLabels, Weaken: tt.weaken, SkipWorkdir: true})
			require.NoError(t, err)
			fails := tt.fails
			if gVisor() {
				fails = tt.gvisor
				if fails == "" {
					t.Logf("under gVisor nothing fails: %s", tt.why)
				}
			}
			if fails != "" {
				require.ErrorIs(t, rep.Err(), docker.ErrPreflight)
			} else {
				require.NoError(t, rep.Err())
			}
			skipped := skippedUnder()
			for _, c := range rep.Checks {
				switch _, skip := skipped[c.Name]; {
				case skip:
					require.True(t, c.Skipped, "%s is skipped under %s: %+v", c.Name, sandboxRuntime, c)
				case c.Name == fails:
					require.False(t, c.OK, "%s must fail", c.Name)
					require.False(t, c.Skipped, "%s must fail, not be skipped", c.Name)
					require.NotEmpty(t, c.Detail)
				default:
					require.True(t, c.OK, "only %q fails, not %s: %s", fails, c.Name, c.Detail)
				}
				if gVisor() && tt.gvisor == "" && c.Name == tt.fails && !c.Skipped {
					require.NotEmpty(t, c.Detail, "%s passes under gVisor only with a note saying why", c.Name)
				}
			}
		})
	}
}

// TestPreflightRunsUnderHostRuntime: the preflight's containers get exactly
// the runtime adjustments a provisioned sandbox gets (HostConfig.Runtime and
// the runsc PIDs overhead), and the check inside sees the runtime's kernel.
func TestPreflightRunsUnderHostRuntime(t *testing.T) {
	e := setup(t)
	var mu sync.Mutex
	var seen []policy.Spec
	rep, err := e.host.Preflight(t.Context(), docker.PreflightOptions{Labels: testLabels, Weaken: func(s *policy.Spec) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, *s) // what ContainerCreate gets: Weaken runs last
	}})
	require.NoError(t, err)
	require.NoError(t, rep.Err(), "%+v", rep.Checks)
	require.Len(t, seen, 8, "seven workdir containers and the inside one")

	// A real sandbox with the preflight's PIDs budget, as the daemon has it.
	x, _ := e.provision(t, func(r *exechost.ProvisionRequest) { r.Resources.Pids = 64 })
	list := e.containersOf(t, x.ExecutionID)
	require.Len(t, list, 1)
	ins, err := e.c.ContainerInspect(t.Context(), list[0].ID)
	require.NoError(t, err)
	require.Equal(t, sandboxRuntime, ins.HostConfig.Runtime)
	want := int64(64)
	if gVisor() {
		want += docker.RunscPidsOverhead
	}
	require.NotNil(t, ins.HostConfig.PidsLimit)
	require.Equal(t, want, *ins.HostConfig.PidsLimit)
	for _, s := range seen {
		require.Equal(t, ins.HostConfig.Runtime, s.HostConfig.Runtime)
		require.NotNil(t, s.HostConfig.PidsLimit)
		require.Equal(t, *ins.HostConfig.PidsLimit, *s.HostConfig.PidsLimit)
	}

	// Observed from inside, not only configured.
	k := rep.Check(docker.CheckRuntimeKernel)
	require.NotNil(t, k)
	require.True(t, k.OK, k.Detail)
}
