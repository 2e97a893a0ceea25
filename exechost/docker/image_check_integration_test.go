//go:build integration

package docker_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/errdefs"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/internal/testenv"
)

// TestCheckImage asks the real daemon and a real registry on loopback
// what the dry-run preflight asks: present, pullable by digest, or not to
// be had, and why. Nothing is ever pulled.
func TestCheckImage(t *testing.T) {
	e := setup(t)
	reg := testenv.Registry(t)
	const worker = "preflight-worker"
	h, logs := pullHost(t, e, worker, "")
	pushed := testenv.PushOnlyImage(t, e.c, e.base, reg.Addr+"/agentflow/base-preflight", "")
	zero := "@sha256:" + strings.Repeat("0", 64)

	tests := []struct {
		name     string
		host     *docker.Host
		ref      string
		wantNote string
		wantErr  error
		wantMsg  string
	}{
		{name: "present local image", host: h, ref: e.base, wantNote: "present on the worker's daemon"},
		{name: "only in the registry", host: h, ref: pushed.Ref, wantNote: "pullable from " + reg.Addr + " (no credentials)"},
		{name: "digest the registry does not hold", host: h, ref: reg.Addr + "/agentflow/base-preflight" + zero,
			wantErr: exechost.ErrImageNotFound, wantMsg: "its registry does not have it"},
		{name: "repository the registry does not hold", host: h, ref: reg.Addr + "/agentflow/never-pushed" + zero,
			wantErr: exechost.ErrImageNotFound, wantMsg: "its registry does not have it"},
		{name: "local image ID the daemon lacks", host: h, ref: "sha256:" + strings.Repeat("f", 64),
			wantErr: exechost.ErrImageNotFound, wantMsg: "a local image ID cannot be pulled"},
		{name: "registry nobody listens on", host: h, ref: "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)) + "/agentflow/x" + zero,
			wantErr: exechost.ErrImageUnavailable, wantMsg: "its registry did not confirm it"},
		{name: "registry the operator did not list", ref: pushed.Ref,
			host: func() *docker.Host {
				hl, err := docker.New(docker.Options{Client: e.c, Store: e.sealed, KillGrace: time.Second, Runtime: sandboxRuntime,
					Worker: worker, DockerConfigDir: t.TempDir(), PullRegistries: []string{"registry.invalid:5000"}})
				require.NoError(t, err)
				return hl
			}(),
			wantErr: exechost.ErrImageNotFound, wantMsg: "is not one this worker pulls from"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			note, err := tt.host.CheckImage(t.Context(), tt.ref)
			t.Logf("note %q, error: %v", note, err)
			if tt.wantErr == nil {
				require.NoError(t, err)
				require.Contains(t, note, tt.wantNote)
			} else {
				require.ErrorIs(t, err, tt.wantErr)
				require.ErrorContains(t, err, tt.wantMsg)
				require.ErrorContains(t, err, worker)
			}
		})
	}
	_, err := e.c.ImageInspect(t.Context(), pushed.Ref)
	require.True(t, errdefs.IsNotFound(err), "the preflight pulled nothing: %v", err)
	require.Zero(t, logs.count(`"msg":"pulling image"`))
}
