//go:build integration

package docker_test

import (
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker/policy"
)

// A sandbox killed or removed from outside (an operator's docker kill or
// docker rm -f, a daemon restart) while its tool runs is a lost sandbox:
// Exec returns ErrTerminated saying so, not the tool's "exit 137", and the
// execution is gone (a checkpoint of it is refused without touching the
// daemon).
func TestExecInSandboxKilledFromOutside(t *testing.T) {
	tests := []struct {
		name    string
		destroy func(ctx context.Context, e *env, containerID string) error
		want    string
	}{
		{name: "docker kill", want: "killed from outside", destroy: func(ctx context.Context, e *env, id string) error {
			return e.c.ContainerKill(ctx, id, "KILL")
		}},
		{name: "docker rm -f", want: "killed from outside", destroy: func(ctx context.Context, e *env, id string) error {
			return e.c.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t)
			x, _ := e.provision(t, nil)
			list := e.containersOf(t, x.ExecutionID)
			require.Len(t, list, 1)
			containerID := list[0].ID

			type outcome struct {
				res *exechost.ExecResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := e.host.Exec(context.Background(), x.ExecutionID, exechost.ExecRequest{
					Command: []string{"/bin/sh", "-c", "echo started > /workspace/started; exec sleep 987"},
					Timeout: time.Minute,
				})
				done <- outcome{res, err}
			}()
			// The tool is running once its marker exists (read through the
			// daemon directly: the host serialises its own execs).
			require.Eventually(t, func() bool { return fileExists(t, e, containerID, "/workspace/started") },
				30*time.Second, 100*time.Millisecond)
			require.NoError(t, tt.destroy(t.Context(), e, containerID))

			var o outcome
			select {
			case o = <-done:
			case <-time.After(time.Minute):
				t.Fatal("Exec did not return after the sandbox was destroyed")
			}
			require.ErrorIs(t, o.err, exechost.ErrTerminated, "got %v", o.err)
			require.Contains(t, o.err.Error(), tt.want)
			if o.res != nil {
				require.False(t, o.res.OOMKilled)
			}
			_, err := e.host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{})
			require.ErrorIs(t, err, exechost.ErrTerminated)
			require.Eventually(t, func() bool { return len(e.containersOf(t, x.ExecutionID)) == 0 }, 30*time.Second, 100*time.Millisecond)
		})
	}
}

// fileExists runs test -e through the Docker API, as the sandbox user; false while the container is not ready.
func fileExists(t *testing.T, e *env, containerID, path string) bool {
	t.Helper()
	ctx := t.Context()
	created, err := e.c.ContainerExecCreate(ctx, containerID, container.ExecOptions{User: policy.DefaultUser, Cmd: []string{"test", "-e", path}})
	if err != nil {
		return false
	}
	if err := e.c.ContainerExecStart(ctx, created.ID, container.ExecStartOptions{}); err != nil {
		return false
	}
	for {
		ins, err := e.c.ContainerExecInspect(ctx, created.ID)
		if err != nil {
			return false
		}
		if !ins.Running {
			return ins.ExitCode == 0
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}
