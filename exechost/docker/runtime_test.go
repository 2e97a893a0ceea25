package docker

import (
	"context"
	"errors"
	"testing"

	"github.com/docker/docker/api/types/system"
	"github.com/stretchr/testify/require"
)

type infoStub struct {
	info system.Info
	err  error
}

func (s infoStub) Info(context.Context) (system.Info, error) { return s.info, s.err }

func TestCheckRuntime(t *testing.T) {
	info := system.Info{Runtimes: map[string]system.RuntimeWithStatus{"runc": {}, "runsc": {}}}
	require.NoError(t, CheckRuntime(t.Context(), infoStub{info: info}, "runsc"))
	require.NoError(t, CheckRuntime(t.Context(), infoStub{info: info}, "runc"))
	require.NoError(t, CheckRuntime(t.Context(), infoStub{err: errors.New("unreachable")}, ""), "the default needs no check")

	err := CheckRuntime(t.Context(), infoStub{info: system.Info{Runtimes: map[string]system.RuntimeWithStatus{"runc": {}}}}, "runsc")
	require.ErrorContains(t, err, `sandbox runtime "runsc" is not registered`)
	require.ErrorContains(t, err, "it has: runc")
	require.ErrorContains(t, err, "scripts/install-runsc.sh")

	err = CheckRuntime(t.Context(), infoStub{info: info}, "kata")
	require.ErrorContains(t, err, `"kata" is not registered`)
	require.ErrorContains(t, err, "runc, runsc")

	require.ErrorContains(t, CheckRuntime(t.Context(), infoStub{err: errors.New("unreachable")}, "runsc"), "unreachable")
}

func TestEgressUnavailable(t *testing.T) {
	info := system.Info{DefaultRuntime: "runc", Runtimes: map[string]system.RuntimeWithStatus{
		"runc":       {},
		"runsc":      {Runtime: system.Runtime{Path: "/usr/bin/runsc", Args: []string{"--network=none", "--oci-seccomp"}}},
		"runsc-net":  {Runtime: system.Runtime{Path: "/usr/bin/runsc", Args: []string{"--network=host"}}},
		"runsc-sep":  {Runtime: system.Runtime{Path: "/usr/bin/runsc", Args: []string{"--network", "none"}}},
		"kata":       {Runtime: system.Runtime{Path: "/usr/bin/kata"}},
		"runsc-none": {Runtime: system.Runtime{Path: "/usr/bin/runsc", Args: []string{"-network=none"}}},
	}}
	for name, want := range map[string]bool{"": false, "runc": false, "runsc": true, "runsc-net": false, "runsc-sep": true, "kata": false, "runsc-none": true, "unknown": false} {
		got := egressUnavailable(info, name)
		require.Equal(t, want, got != "", "%s: %q", name, got)
	}
	info.DefaultRuntime = "runsc"
	require.NotEmpty(t, egressUnavailable(info, ""), "the daemon's default runtime counts")
}
