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
