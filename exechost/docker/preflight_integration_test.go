//go:build integration

package docker_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/exechost/docker/policy"
)

func TestPreflightPassesOnThisDaemon(t *testing.T) {
	e := setup(t)
	rep, err := e.host.Preflight(t.Context(), docker.PreflightOptions{Labels: testLabels})
	require.NoError(t, err)
	require.NoError(t, rep.Err(), "%+v", rep.Checks)
	for _, n := range []string{docker.CheckWorkdirFD, docker.CheckMaskedPaths, docker.CheckSeccomp,
		docker.CheckNoNewPrivs, docker.CheckNoCaps, docker.CheckKeeperUID} {
		c := rep.Check(n)
		require.NotNil(t, c, "check %s ran", n)
		require.True(t, c.OK, "%s: %s", n, c.Detail)
	}
	require.NotEmpty(t, rep.KernelVersion)
	require.NotEmpty(t, rep.DockerVersion)
	require.NotEmpty(t, rep.RuncVersion)
	require.NotEmpty(t, rep.ContainerdVersion)
}

// TestPreflightCatchesWeakenedPolicy: each check fails when the protection
// it stands for is taken away, and only the matching one.
func TestPreflightCatchesWeakenedPolicy(t *testing.T) {
	tests := []struct {
		name   string
		weaken func(*policy.Spec)
		fails  string
	}{
		{name: "daemon's default seccomp instead of ours", fails: docker.CheckSeccomp, weaken: func(s *policy.Spec) {
			s.HostConfig.SecurityOpt = []string{"no-new-privileges"}
		}},
		{name: "seccomp unconfined", fails: docker.CheckSeccomp, weaken: func(s *policy.Spec) {
			s.HostConfig.SecurityOpt = []string{"no-new-privileges", "seccomp=unconfined"}
		}},
		{name: "a capability added back", fails: docker.CheckNoCaps, weaken: func(s *policy.Spec) {
			s.HostConfig.CapAdd = []string{"SYS_PTRACE"}
		}},
		{name: "no-new-privileges off", fails: docker.CheckNoNewPrivs, weaken: func(s *policy.Spec) {
			s.HostConfig.SecurityOpt = s.HostConfig.SecurityOpt[1:]
		}},
		{name: "keeper runs as the tool", fails: docker.CheckKeeperUID, weaken: func(s *policy.Spec) {
			s.Config.User = policy.DefaultUser
		}},
		{name: "proc paths unmasked", fails: docker.CheckMaskedPaths, weaken: func(s *policy.Spec) {
			s.HostConfig.MaskedPaths = []string{"/proc/asound"}
		}},
	}
	e := setup(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := e.host.Preflight(t.Context(), docker.PreflightOptions{Labels: testLabels, Weaken: tt.weaken, SkipWorkdir: true})
			require.NoError(t, err)
			require.ErrorIs(t, rep.Err(), docker.ErrPreflight)
			for _, c := range rep.Checks {
				if c.Name == tt.fails {
					require.False(t, c.OK, "%s must fail", c.Name)
					require.NotEmpty(t, c.Detail)
				} else {
					require.True(t, c.OK, "only %s fails, not %s: %s", tt.fails, c.Name, c.Detail)
				}
			}
		})
	}
}
