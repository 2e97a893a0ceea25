//go:build e2e

package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/testenv"
	"github.com/agentflow/agentflow/workflows"
)

// TestEngineRunsAStepWhoseImageIsOnlyInARegistry: issue 9's registry
// case through the whole engine. The testtool image is pushed to a
// loopback registry and removed from the daemon, as on a worker that never
// had it; the step names it by repo@sha256 and runs. A local image ID the
// daemon lacks fails its step at once, without retries.
func TestEngineRunsAStepWhoseImageIsOnlyInARegistry(t *testing.T) {
	// The worker pulls anonymously, whatever this machine's ~/.docker holds.
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	dc := testenv.Docker(t)
	reg := testenv.Registry(t)
	tool := loadImages(t, repoRoot(t), "testtool")["testtool"]
	img := testenv.PushOnlyImage(t, dc, tool, reg.Addr+"/agentflow/testtool", "")
	e := startEngine(t)
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000_000)

	t.Run("pulled by digest and run", func(t *testing.T) {
		id := "e2e-pull-" + suffix
		s := e.step("pulled", "testtool", map[string]any{"mode": "ok", "from": "registry"})
		s.Image = img.Ref
		res, err := e.wait(t, e.start(t, id, plan("e2e-pull", s), nil))
		require.NoError(t, err)
		require.Equal(t, workflows.RunSucceeded, res.Status)
		r := stepRecord(t, e.status(t, id), "pulled")
		require.Equal(t, workflows.StepSuccess, r.Status)
		require.Equal(t, "registry", r.Output["from"])
		require.EqualValues(t, 1, r.Attempts)
		pulled, err := dc.ImageInspect(t.Context(), img.Ref)
		require.NoError(t, err)
		require.Equal(t, img.ID, pulled.ID, "the image pushed is the image run")
		e.requireNoContainers(t, id)
	})

	t.Run("missing local image ID is not retried", func(t *testing.T) {
		id := "e2e-pull-local-" + suffix
		s := e.step("local", "testtool", map[string]any{"mode": "ok"})
		s.Image = "sha256:" + strings.Repeat("e", 64)
		s.Retries = 2
		_, err := e.wait(t, e.start(t, id, plan("e2e-pull-local", s), nil))
		require.Error(t, err)
		st := e.status(t, id)
		require.Equal(t, workflows.RunFailed, st.Status)
		r := stepRecord(t, st, "local")
		require.Equal(t, workflows.StepFailed, r.Status)
		require.EqualValues(t, 1, r.Attempts, "ImageNotFound is never retried")
		require.Contains(t, r.Error, "a local image ID cannot be pulled")
		require.Contains(t, r.Error, "is not on worker ")
		e.requireNoContainers(t, id)
	})
}
