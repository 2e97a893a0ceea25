//go:build integration

package docker_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/errdefs"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/internal/testenv"
)

// The image pull tests run against a real registry on loopback
// (testenv.Registry) and the real daemon: an image pushed there
// and removed locally exists only in the registry, as on a worker that
// never had it.

// syncBuffer collects a host's log lines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

// pullHost is a host named worker whose registry credentials are in
// configDir ("" = an empty directory: anonymous pulls).
func pullHost(t *testing.T, e *env, worker, configDir string) (*docker.Host, *syncBuffer) {
	t.Helper()
	if configDir == "" {
		configDir = t.TempDir()
	}
	logs := &syncBuffer{}
	h, err := docker.New(docker.Options{Client: e.c, Store: e.sealed, KillGrace: time.Second, Runtime: sandboxRuntime,
		Worker: worker, DockerConfigDir: configDir, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	require.NoError(t, err)
	return h, logs
}

func pullRequest(t *testing.T, ref string) exechost.ProvisionRequest {
	return exechost.ProvisionRequest{ExecutionID: newID(t), Image: ref, Resources: limits(), Network: exechost.NetworkNone, Labels: testLabels}
}

// provisionAndRun provisions ref on h, runs a command in it and terminates
// it; it returns the execution.
func provisionAndRun(t *testing.T, h *docker.Host, ref string) *exechost.Execution {
	t.Helper()
	x, err := h.Provision(t.Context(), pullRequest(t, ref))
	require.NoError(t, err)
	defer func() { require.NoError(t, h.Terminate(context.Background(), x.ExecutionID)) }()
	res, err := h.Exec(t.Context(), x.ExecutionID, exechost.ExecRequest{
		Command: []string{"/bin/sh", "-c", "echo ran-from-registry"}, Timeout: 30 * time.Second})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	require.Equal(t, "ran-from-registry\n", string(res.Stdout))
	return x
}

func TestProvisionPullsAnImageOnlyInTheRegistry(t *testing.T) {
	e := setup(t)
	reg := testenv.Registry(t)
	img := testenv.PushOnlyImage(t, e.c, e.base, reg.Addr+"/agentflow/base-pull", "")
	h, logs := pullHost(t, e, "pull-worker-1", "")

	// Two steps need the missing image at once: both run it.
	const n = 2
	var wg sync.WaitGroup
	xs := make([]*exechost.Execution, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			xs[i] = provisionAndRun(t, h, img.Ref)
		}()
	}
	wg.Wait()
	for _, x := range xs {
		require.NotNil(t, x)
		// Content-addressed: the pulled image is the very image pushed.
		require.Equal(t, img.ID, x.ImageDigest)
	}
	require.Equal(t, 1, logs.count(`"msg":"pulling image"`), "one pull for both steps")
	require.Equal(t, 1, logs.count(`"msg":"pulled image"`))

	pulled, err := e.c.ImageInspect(t.Context(), img.Ref)
	require.NoError(t, err)
	require.Contains(t, pulled.RepoDigests, img.Ref)
	require.Empty(t, pulled.RepoTags, "pulled by digest, never by a tag")
}

func TestProvisionImageErrors(t *testing.T) {
	e := setup(t)
	reg := testenv.Registry(t)
	const worker = "pull-worker-errors"
	h, _ := pullHost(t, e, worker, "")

	tests := []struct {
		name  string
		ref   string
		class string
		msg   string
	}{
		{name: "digest the registry does not hold", ref: reg.Addr + "/agentflow/base-pull@sha256:" + strings.Repeat("0", 64),
			class: failure.ImageNotFound, msg: "its registry does not have it"},
		{name: "local image ID the daemon lacks", ref: "sha256:" + strings.Repeat("f", 64),
			class: failure.ImageNotFound, msg: "is not on worker " + worker + " and a local image ID cannot be pulled; load the image on every worker or use repo@sha256:"},
		{name: "registry nobody listens on", ref: "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)) + "/agentflow/base-pull@sha256:" + strings.Repeat("0", 64),
			class: failure.ImageUnavailable, msg: "could not be pulled (no credentials)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := pullRequest(t, tt.ref)
			_, err := h.Provision(t.Context(), req)
			checkImageError(t, e, err, req.ExecutionID, worker, tt.class, tt.msg)
		})
	}

	t.Run("registry the operator did not list", func(t *testing.T) {
		img := testenv.PushOnlyImage(t, e.c, e.base, reg.Addr+"/agentflow/base-unlisted", "")
		hl, err := docker.New(docker.Options{Client: e.c, Store: e.sealed, KillGrace: time.Second, Runtime: sandboxRuntime,
			Worker: worker, DockerConfigDir: t.TempDir(), PullRegistries: []string{"registry.invalid:5000"}})
		require.NoError(t, err)
		req := pullRequest(t, img.Ref)
		_, err = hl.Provision(t.Context(), req)
		checkImageError(t, e, err, req.ExecutionID, worker, failure.ImageNotFound, "its registry "+reg.Addr+" is not one this worker pulls from")
		_, err = e.c.ImageInspect(t.Context(), img.Ref)
		require.True(t, errdefs.IsNotFound(err), "nothing pulled: %v", err)
	})
}

func checkImageError(t *testing.T, e *env, err error, id exechost.ExecutionID, worker, class, msg string) {
	t.Helper()
	require.Error(t, err)
	t.Logf("error: %v", err)
	require.Equal(t, class, failure.HostType(err, false))
	require.ErrorContains(t, err, msg)
	require.ErrorContains(t, err, worker)
	var ie *docker.ImageError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, worker, ie.Worker)
	e.requireGone(t, id)
}

func TestProvisionPullsAgainWhenTheRegistryIsBack(t *testing.T) {
	e := setup(t)
	reg := testenv.Registry(t)
	img := testenv.PushOnlyImage(t, e.c, e.base, reg.Addr+"/agentflow/base-outage", "")
	h, _ := pullHost(t, e, "pull-worker-outage", "")

	reg.Stop()
	req := pullRequest(t, img.Ref)
	_, err := h.Provision(t.Context(), req)
	require.ErrorIs(t, err, exechost.ErrImageUnavailable)
	require.Equal(t, failure.ImageUnavailable, failure.HostType(err, false))
	require.True(t, failure.Infrastructure(failure.ImageUnavailable), "retried on the infrastructure budget")
	e.requireGone(t, req.ExecutionID)
	_, err = e.c.ImageInspect(t.Context(), img.Ref)
	require.True(t, errdefs.IsNotFound(err), "nothing pulled: %v", err)

	// The retry, with the registry back, runs the step.
	reg.Start()
	x := provisionAndRun(t, h, img.Ref)
	require.Equal(t, img.ID, x.ImageDigest)
}

func TestProvisionPullsWithTheWorkersCredentials(t *testing.T) {
	e := setup(t)
	reg := testenv.RegistryWith(t, testenv.RegistryOptions{WithAuth: true})
	auth := testenv.RegistryAuth(reg.Addr, testenv.RegistryUser, testenv.RegistryPassword)
	viaFile := testenv.PushOnlyImage(t, e.c, e.base, reg.Addr+"/agentflow/private-a", auth)
	viaHelper := testenv.PushOnlyImage(t, e.c, e.base, reg.Addr+"/agentflow/private-b", auth)

	// Refusals first: a successful pull leaves the image on the daemon.
	t.Run("no credentials", func(t *testing.T) {
		h, _ := pullHost(t, e, "pull-worker-anon", "")
		_, err := h.Provision(t.Context(), pullRequest(t, viaFile.Ref))
		require.ErrorIs(t, err, exechost.ErrImageUnavailable)
		require.ErrorContains(t, err, "no credentials")
	})
	t.Run("wrong password", func(t *testing.T) {
		dir := testenv.DockerConfigDir(t, testenv.BasicAuthConfig(reg.Addr, testenv.RegistryUser, "not-the-password"))
		h, _ := pullHost(t, e, "pull-worker-wrong", dir)
		_, err := h.Provision(t.Context(), pullRequest(t, viaFile.Ref))
		t.Logf("error: %v", err)
		// The daemon reports refused credentials as a server error, like an
		// unreachable registry: a worker-local problem, retried on the
		// infrastructure budget (docs/security/images.md).
		require.ErrorIs(t, err, exechost.ErrImageUnavailable)
		require.ErrorContains(t, err, "unauthorized")
		require.ErrorContains(t, err, `auths["`+reg.Addr+`"]`, "names where the credentials came from")
		require.NotContains(t, err.Error(), "not-the-password")
	})
	t.Run("auths entry", func(t *testing.T) {
		dir := testenv.DockerConfigDir(t, testenv.BasicAuthConfig(reg.Addr, testenv.RegistryUser, testenv.RegistryPassword))
		h, _ := pullHost(t, e, "pull-worker-file", dir)
		x := provisionAndRun(t, h, viaFile.Ref)
		require.Equal(t, viaFile.ID, x.ImageDigest)
	})
	t.Run("credential helper", func(t *testing.T) {
		// The worker runs docker-credential-<credsStore> get, as the Docker
		// CLI does; this one answers for the test registry only.
		bin := t.TempDir()
		script := "#!/bin/sh\nread server\n[ \"$server\" = \"" + reg.Addr + "\" ] || { echo 'credentials not found in native keychain'; exit 1; }\n" +
			"printf '{\"ServerURL\":\"%s\",\"Username\":\"" + testenv.RegistryUser + "\",\"Secret\":\"" + testenv.RegistryPassword + "\"}' \"$server\"\n"
		require.NoError(t, os.WriteFile(filepath.Join(bin, "docker-credential-agentflow-test"), []byte(script), 0o755))
		t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		dir := testenv.DockerConfigDir(t, map[string]any{"credsStore": "agentflow-test", "auths": map[string]any{reg.Addr: map[string]any{}}})
		h, logs := pullHost(t, e, "pull-worker-helper", dir)
		x := provisionAndRun(t, h, viaHelper.Ref)
		require.Equal(t, viaHelper.ID, x.ImageDigest)
		require.Equal(t, 1, logs.count("docker-credential-agentflow-test"), "the pull log names the helper")
	})
}
