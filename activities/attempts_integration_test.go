//go:build integration

package activities

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/internal/attemptrec"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/testenv"
)

const testtoolTag = "agentflow/tool-testtool:1.0"

// countingHost counts provisions on the real host (adoption must not make
// a sandbox).
type countingHost struct {
	exechost.ExecutionHost
	provisions atomic.Int32
}

func (h *countingHost) Provision(ctx context.Context, req exechost.ProvisionRequest) (*exechost.Execution, error) {
	h.provisions.Add(1)
	return h.ExecutionHost.Provision(ctx, req)
}

type dockerFixture struct {
	c      *client.Client
	host   *countingHost
	sealed *checkpoint.Sealed
	local  *checkpoint.Local
	image  string
	suite  string
	labels map[string]string
}

func newDockerFixture(t *testing.T) *dockerFixture {
	t.Helper()
	c := testenv.Docker(t)
	img, err := c.ImageInspect(t.Context(), testtoolTag)
	require.NoError(t, err, "image %s: run tools/build-images.sh first", testtoolTag)
	suite := fmt.Sprintf("activities-attempts-%d-%s", os.Getpid(), t.Name())
	f := &dockerFixture{c: c, image: img.ID, suite: suite,
		labels: map[string]string{"agentflow.test": "1", "agentflow.test.suite": suite}}
	f.local, err = checkpoint.NewLocal(t.TempDir())
	require.NoError(t, err)
	keys, _, err := checkpoint.LoadOrCreateLocalKeyring(t.TempDir())
	require.NoError(t, err)
	f.sealed, err = checkpoint.NewSealed(f.local, keys, checkpoint.SealedOptions{})
	require.NoError(t, err)
	h, err := docker.New(docker.Options{Client: c, Store: f.sealed, KillGrace: time.Second})
	require.NoError(t, err)
	f.host = &countingHost{ExecutionHost: h}
	t.Cleanup(func() {
		list := f.containers(t)
		for _, s := range list {
			_ = c.ContainerRemove(context.Background(), s.ID, container.RemoveOptions{Force: true})
		}
		if len(list) > 0 {
			t.Errorf("%d sandbox(es) left behind", len(list))
		}
	})
	return f
}

func (f *dockerFixture) containers(t *testing.T) []container.Summary {
	t.Helper()
	list, err := f.c.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", "agentflow.test.suite="+f.suite))})
	require.NoError(t, err)
	return list
}

func (f *dockerFixture) harness(t *testing.T) *harness {
	h := newHarness(t)
	h.other = f.host
	h.opts.Labels = f.labels
	return h
}

func (f *dockerFixture) req(mode map[string]any) StepRequest {
	req := baseReq()
	req.Tool, req.Image, req.Checkpoints = "testtool:1.0", f.image, nil
	req.Timeout = 2 * time.Minute
	req.Resources.MemoryBytes, req.Resources.DiskBytes = 128<<20, 16<<20
	req.Input = mode
	return req
}

// A sandbox killed from outside mid-tool is a lost sandbox (infrastructure,
// retried), not "ToolFailed: exit 137", and no checkpoint of the dead
// container is attempted.
func TestRealSandboxKilledFromOutsideIsLost(t *testing.T) {
	f := newDockerFixture(t)
	h := f.harness(t)
	req := f.req(map[string]any{"mode": "sleep", "seconds": 300})
	req.Attempt = 1

	killed := make(chan error, 1)
	go func() {
		// Kill the sandbox once its tool runs (the tool is the only
		// process named "tool" in it).
		tick := time.NewTicker(100 * time.Millisecond) // polling the daemon
		defer tick.Stop()
		deadline := time.After(time.Minute)
		for {
			list, _ := f.c.ContainerList(context.Background(), container.ListOptions{
				Filters: filters.NewArgs(filters.Arg("label", "agentflow.test.suite="+f.suite))})
			for _, s := range list {
				top, err := f.c.ContainerTop(context.Background(), s.ID, nil)
				if err != nil {
					continue
				}
				for _, p := range top.Processes {
					if len(p) > 0 && containsTool(p) {
						killed <- f.c.ContainerKill(context.Background(), s.ID, "KILL")
						return
					}
				}
			}
			select {
			case <-tick.C:
			case <-deadline:
				killed <- fmt.Errorf("the tool never started")
				return
			}
		}
	}()
	_, err := h.run(t, req)
	require.NoError(t, <-killed)
	app, d := failureDetails(t, err)
	require.Equal(t, ErrTypeSandboxLost, app.Type(), "got %v", err)
	require.False(t, app.NonRetryable())
	require.Contains(t, app.Message(), "killed from outside (exit 137")
	require.Empty(t, d.CheckpointID)
	entries, rerr := os.ReadDir(f.local.Dir())
	require.NoError(t, rerr)
	require.Empty(t, entries, "no checkpoint of the dead sandbox")
	require.Empty(t, f.containers(t))
}

func containsTool(fields []string) bool {
	for _, s := range fields {
		if strings.HasSuffix(s, "/bin/tool") {
			return true
		}
	}
	return false
}

// On the real host: attempt 1 runs and records its result; attempt 2
// (its predecessor's report lost) adopts it, with the checkpoint verified
// through the sealed store, and makes no sandbox.
func TestRealHostAdoptsFinishedPredecessor(t *testing.T) {
	f := newDockerFixture(t)
	h := f.harness(t)
	keys, _, err := checkpoint.LoadOrCreateLocalKeyring(t.TempDir())
	require.NoError(t, err)
	rs, err := attemptrec.New(objstore.NewMem(), keys, 0)
	require.NoError(t, err)
	h.opts.Results, h.opts.Checkpoints = rs, f.sealed

	req := f.req(map[string]any{"mode": "ok", "n": 1})
	req.Attempt = 1
	first, err := h.run(t, req)
	require.NoError(t, err)
	require.Equal(t, int32(1), f.host.provisions.Load())

	req.Attempt = 2
	second, err := h.run(t, req)
	require.NoError(t, err)
	require.Equal(t, int32(1), second.AdoptedFrom)
	require.Equal(t, first.Output, second.Output)
	require.Equal(t, first.CheckpointID, second.CheckpointID)
	require.Equal(t, int32(1), f.host.provisions.Load(), "the adopting attempt makes no sandbox")

	// Without the checkpoint the record is worthless: attempt 3 runs.
	require.NoError(t, f.sealed.Delete(t.Context(), exechost.CheckpointID(first.CheckpointID)))
	req.Attempt = 3
	third, err := h.run(t, req)
	require.NoError(t, err)
	require.Zero(t, third.AdoptedFrom)
	require.Equal(t, int32(2), f.host.provisions.Load())
	require.Empty(t, f.containers(t))
}
