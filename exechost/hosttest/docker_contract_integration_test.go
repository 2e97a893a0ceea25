//go:build integration

package hosttest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/exechost/docker/policy"
	"github.com/agentflow/agentflow/exechost/docker/runner"
	"github.com/agentflow/agentflow/exechost/gitsource"
	"github.com/agentflow/agentflow/exechost/hosttest"
	"github.com/agentflow/agentflow/internal/testenv"
)

const baseTag = "agentflow/base:latest"

// suiteLabel marks this package's containers, so the leftover check never
// looks at containers of other suites running at the same time.
var suiteLabel = fmt.Sprintf("exechost-hosttest-%d", os.Getpid())

// TestMain fails the package when a container or network of this suite
// (test label plus suiteLabel) created during the run is left behind.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, "agentflow.test=1", "agentflow.test.suite="+suiteLabel))
}

// dockerClient returns a client to a live daemon or skips; with
// AGENTFLOW_REQUIRE_DOCKER=1 a missing daemon fails the test instead.
func dockerClient(t *testing.T) *client.Client { return testenv.Docker(t) }

// TestDockerHostContract runs the contract suite against the Docker host
// once per sandbox runtime in AGENTFLOW_TEST_RUNTIMES (default "runc"; CI
// sets "runc,runsc"), as subtests named by runtime. A listed runtime the
// daemon does not have fails the subtest (never a skip).
func TestDockerHostContract(t *testing.T) {
	c := dockerClient(t)
	for _, rt := range testenv.Runtimes() {
		t.Run(rt, func(t *testing.T) {
			require.NoError(t, docker.CheckRuntime(t.Context(), c, rt), "AGENTFLOW_TEST_RUNTIMES lists %s", rt)
			dockerHostContract(t, c, rt, docker.PoolOptions{})
		})
	}
}

// TestDockerHostContractWarmPool runs the contract suite against a Docker
// host with its warm pool on (exechost/docker pool.go), per runtime: a
// pooled sandbox keeps every promise a cold one does.
func TestDockerHostContractWarmPool(t *testing.T) {
	c := dockerClient(t)
	for _, rt := range testenv.Runtimes() {
		t.Run(rt, func(t *testing.T) {
			require.NoError(t, docker.CheckRuntime(t.Context(), c, rt), "AGENTFLOW_TEST_RUNTIMES lists %s", rt)
			dockerHostContract(t, c, rt, docker.PoolOptions{Size: 2})
		})
	}
}

func dockerHostContract(t *testing.T, c *client.Client, runtime string, pool docker.PoolOptions) {
	img, err := c.ImageInspect(t.Context(), baseTag)
	if errdefs.IsNotFound(err) {
		t.Fatalf("image %s not found: run `make images` (tools/build-images.sh) first", baseTag)
	}
	require.NoError(t, err)
	store, err := checkpoint.NewLocal(t.TempDir())
	require.NoError(t, err)
	keys, _, err := checkpoint.LoadOrCreateLocalKeyring(t.TempDir())
	require.NoError(t, err)
	sealed, err := checkpoint.NewSealed(store, keys, checkpoint.SealedOptions{})
	require.NoError(t, err)
	root := gitRoot(t)
	labels := map[string]string{"agentflow.test": "1", "agentflow.test.suite": suiteLabel}
	pool.Labels = labels
	host, err := docker.New(docker.Options{Client: c, Store: sealed, KillGrace: time.Second,
		Git: gitsource.Config{Roots: []string{root}, MaxEntries: 200}, Runtime: runtime, Pool: pool})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, host.Drain(context.Background())) })
	prefix := fmt.Sprintf("%d-%s-", os.Getpid(), runtime)
	if pool.Size > 0 {
		prefix += "pool-"
	}

	// containerOf finds id's sandbox behind the host's back, by the label
	// the host puts on it.
	// A warm-pool sandbox is labelled with its pool slot, not the
	// execution: it is found by the name it was given when taken.
	containers := func(ctx context.Context, id exechost.ExecutionID) ([]container.Summary, error) {
		list, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
			filters.Arg("label", policy.LabelExecution+"="+string(id)),
			filters.Arg("label", "agentflow.test.suite="+suiteLabel))})
		if err != nil || len(list) > 0 || pool.Size == 0 {
			return list, err
		}
		return c.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
			filters.Arg("name", "^/"+policy.ContainerName(id)+"$"),
			filters.Arg("label", "agentflow.test.suite="+suiteLabel))})
	}
	spy := runner.New(c, runner.Options{})

	hosttest.Run(t, hosttest.Harness{
		Host:     host,
		Image:    img.ID,
		Labels:   labels,
		IDPrefix: prefix,
		GitRoot:  root, GitMaxEntries: 200,
		Probe: func(ctx context.Context, id exechost.ExecutionID, argv []string) ([]byte, int, error) {
			list, err := containers(ctx, id)
			if err != nil {
				return nil, 0, err
			}
			if len(list) != 1 {
				return nil, 0, fmt.Errorf("probe %s: %d sandboxes", id, len(list))
			}
			var out bytes.Buffer
			res, err := spy.Run(ctx, list[0].ID, runner.Command{
				Argv: argv, User: policy.DefaultUser, WorkDir: policy.WorkspaceDir,
				Stdout: &out, MaxOutput: 1 << 20, Timeout: 30 * time.Second,
			})
			return out.Bytes(), res.ExitCode, err
		},
		Exists: func(ctx context.Context, id exechost.ExecutionID) (bool, error) {
			list, err := containers(ctx, id)
			return len(list) > 0, err
		},
		Kill: func(ctx context.Context, id exechost.ExecutionID) error {
			list, err := containers(ctx, id)
			if err != nil {
				return err
			}
			if len(list) != 1 {
				return fmt.Errorf("kill %s: %d sandboxes", id, len(list))
			}
			return c.ContainerKill(ctx, list[0].ID, "KILL")
		},
		TamperCheckpoint: func(_ context.Context, id exechost.CheckpointID) error {
			p := filepath.Join(store.Dir(), string(id)+".tar")
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[len(b)/2] ^= 1
			return os.WriteFile(p, b, 0o600)
		},
		CheckpointContent: func(ctx context.Context, id exechost.CheckpointID) ([]byte, error) {
			_, rc, err := sealed.Get(ctx, id)
			if err != nil {
				return nil, err
			}
			defer rc.Close()
			return io.ReadAll(rc)
		},
	})
	if pool.Size > 0 {
		st := host.PoolStats()
		t.Logf("warm pool: %d hits, %d misses", st.Hits, st.Misses)
		require.Positive(t, st.Hits, "the contract ran on pooled sandboxes too")
	}
}
