//go:build integration

package docker_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/exechost/docker/policy"
	"github.com/agentflow/agentflow/internal/testenv"
)

const baseTag = "agentflow/base:latest"

// suiteLabel marks this package's containers, so the leftover check and the
// reaper test never touch containers of other suites running concurrently.
var suiteLabel = fmt.Sprintf("exechost-docker-%d", os.Getpid())

var testLabels = map[string]string{"agentflow.test": "1", "agentflow.test.suite": suiteLabel}

// TestMain runs the whole package once per sandbox runtime in
// AGENTFLOW_TEST_RUNTIMES (testenv.Runtimes: default "runc"; CI sets
// "runc,runsc"), so every test here — hostile ones included — holds under
// each runtime (setup builds hosts with sandboxRuntime). A pass per runtime
// rather than a subtest per runtime in each test: a test added later is
// covered without anyone remembering to wrap it. Each pass announces its
// runtime and setup logs it in every test, so a failure says which one.
// The package fails when a container or network of this suite (test label
// plus suiteLabel) created during the run is left behind.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(runtimePasses{m}, "agentflow.test=1", "agentflow.test.suite="+suiteLabel))
}

// runtimePasses runs m once per runtime; testenv.Main's leftover check
// covers all passes.
type runtimePasses struct{ m *testing.M }

func (r runtimePasses) Run() int {
	code := 0
	for _, rt := range testenv.Runtimes() {
		sandboxRuntime = rt
		fmt.Printf("=== sandbox runtime %s: exechost/docker suite\n", rt)
		if c := r.m.Run(); c != 0 {
			fmt.Printf("--- FAIL: exechost/docker suite under sandbox runtime %s\n", rt)
			code = c
		}
	}
	return code
}

// sandboxRuntime is the OCI runtime of the current pass ("runc", "runsc").
var sandboxRuntime = "runc"

// gVisor reports whether this pass runs under gVisor: the checks that
// differ there (docs/security/gvisor.md) branch on it, stating the
// difference instead of skipping.
func gVisor() bool { return sandboxRuntime == "runsc" }

// requireRuntime fails (never skips) when the pass's runtime is not
// registered with the daemon: CI asked for it.
func requireRuntime(t *testing.T, c *client.Client) {
	t.Helper()
	t.Logf("sandbox runtime: %s", sandboxRuntime)
	require.NoError(t, docker.CheckRuntime(t.Context(), c, sandboxRuntime), "AGENTFLOW_TEST_RUNTIMES lists %s", sandboxRuntime)
}

// dockerClient returns a client to a live daemon or skips; with
// AGENTFLOW_REQUIRE_DOCKER=1 a missing daemon fails the test instead.
func dockerClient(t *testing.T) *client.Client { return testenv.Docker(t) }

// imageID resolves a local tag to its immutable ID.
func imageID(t *testing.T, c *client.Client, tag string) string {
	t.Helper()
	img, err := c.ImageInspect(t.Context(), tag)
	if errdefs.IsNotFound(err) {
		t.Fatalf("image %s not found: run `make images` (tools/build-images.sh) first", tag)
	}
	require.NoError(t, err)
	return img.ID
}

type env struct {
	c     *client.Client
	host  *docker.Host
	store *checkpoint.Local // the files, for tests that tamper with them
	// sealed is the store the host uses: store behind signed manifests.
	sealed *checkpoint.Sealed
	keys   *checkpoint.Keyring
	base   string
}

func setup(t *testing.T) *env {
	t.Helper()
	c := dockerClient(t)
	requireRuntime(t, c)
	store, err := checkpoint.NewLocal(t.TempDir())
	require.NoError(t, err)
	keys, _, err := checkpoint.LoadOrCreateLocalKeyring(t.TempDir())
	require.NoError(t, err)
	sealed, err := checkpoint.NewSealed(store, keys, checkpoint.SealedOptions{})
	require.NoError(t, err)
	h, err := docker.New(docker.Options{Client: c, Store: sealed, KillGrace: time.Second, Runtime: sandboxRuntime})
	require.NoError(t, err)
	return &env{c: c, host: h, store: store, sealed: sealed, keys: keys, base: imageID(t, c, baseTag)}
}

// restoreReq is a Restore of ck with the test's own image and limits.
func (e *env) restoreReq(ck exechost.CheckpointID, id exechost.ExecutionID) exechost.RestoreRequest {
	r := limits()
	return exechost.RestoreRequest{CheckpointID: ck, ExecutionID: id, Image: e.base, Resources: &r, Labels: testLabels}
}

func limits() exechost.ResourceLimits {
	return exechost.ResourceLimits{
		NanoCPUs: 1e9, MemoryBytes: 128 << 20, DiskBytes: 32 << 20, Pids: 64,
		Runtime: 2 * time.Minute, MaxOutputBytes: 1 << 20,
	}
}

var idSeq int

func newID(t *testing.T) exechost.ExecutionID {
	idSeq++
	return exechost.ExecutionID(fmt.Sprintf("test/%s/%d/%d", strings.ReplaceAll(t.Name(), "/", "_"), os.Getpid(), idSeq))
}

// provision creates a sandbox that is terminated when the test ends.
func (e *env) provision(t *testing.T, mutate func(*exechost.ProvisionRequest)) (*exechost.Execution, exechost.ProvisionRequest) {
	t.Helper()
	req := exechost.ProvisionRequest{ExecutionID: newID(t), Image: e.base, Resources: limits(), Network: exechost.NetworkNone, Labels: testLabels}
	if mutate != nil {
		mutate(&req)
	}
	x, err := e.host.Provision(t.Context(), req)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.host.Terminate(context.Background(), x.ExecutionID)) })
	return x, req
}

func (e *env) sh(t *testing.T, id exechost.ExecutionID, script string) *exechost.ExecResult {
	t.Helper()
	res, err := e.host.Exec(t.Context(), id, exechost.ExecRequest{Command: []string{"/bin/sh", "-c", script}, Timeout: 30 * time.Second})
	require.NoError(t, err)
	return res
}

// containersOf lists the containers labelled with an execution.
func (e *env) containersOf(t *testing.T, id exechost.ExecutionID) []container.Summary {
	t.Helper()
	list, err := e.c.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", policy.LabelExecution+"="+string(id)))})
	require.NoError(t, err)
	return list
}

func (e *env) requireGone(t *testing.T, id exechost.ExecutionID) {
	t.Helper()
	require.Empty(t, e.containersOf(t, id), "sandbox of %s must be gone", id)
}

// secondImage commits the base rootfs as a new image with another label, so
// a restore can target a different image ID.
func (e *env) secondImage(t *testing.T) string {
	t.Helper()
	return e.imageWithChanges(t, "agentflow-test/restore-target:c", "LABEL agentflow.test=1", "LABEL variant=restore-target")
}

// imageWithChanges commits the base rootfs as image ref with Dockerfile
// changes (LABEL, ENV, …), removed when the test ends.
func (e *env) imageWithChanges(t *testing.T, ref string, changes ...string) string {
	t.Helper()
	ctx := t.Context()
	cr, err := e.c.ContainerCreate(ctx, &container.Config{Image: e.base, Labels: testLabels, Entrypoint: []string{"true"}}, nil, nil, nil, "")
	require.NoError(t, err)
	defer e.c.ContainerRemove(context.Background(), cr.ID, container.RemoveOptions{Force: true})
	resp, err := e.c.ContainerCommit(ctx, cr.ID, container.CommitOptions{Reference: ref, Changes: changes})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = e.c.ImageRemove(context.Background(), resp.ID, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	require.NotEqual(t, e.base, resp.ID)
	return resp.ID
}
