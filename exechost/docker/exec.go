package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker/policy"
	"github.com/agentflow/agentflow/exechost/docker/runner"
)

// Exec implements exechost.ExecutionHost.
func (h *Host) Exec(ctx context.Context, id exechost.ExecutionID, req exechost.ExecRequest) (*exechost.ExecResult, error) {
	if err := h.policy.ValidateExec(req); err != nil {
		return nil, fmt.Errorf("exec %s: %w", id, err)
	}
	e, err := h.lookup(id)
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()

	timeout := req.Timeout
	remaining := time.Until(e.deadline)
	if remaining <= 0 {
		h.lost(e)
		return nil, fmt.Errorf("exec %s: sandbox deadline passed: %w", id, exechost.ErrTimeout)
	}
	if timeout == 0 || timeout > remaining {
		timeout = remaining
	}
	var stdout, stderr bytes.Buffer
	// The caller's live writer never holds up the runner (LiveStream
	// queues); it has what the command wrote once Run returns.
	live := exechost.NewLiveStream(req.Stderr)
	cmd := runner.Command{
		Argv:      req.Command,
		Env:       policy.ExecEnv(req),
		User:      h.policy.User(),
		WorkDir:   policy.WorkspaceDir,
		Stdout:    &stdout,
		Stderr:    io.MultiWriter(&stderr, live),
		MaxOutput: e.resources.MaxOutputBytes,
		Timeout:   timeout,
	}
	if len(req.Stdin) > 0 {
		cmd.Stdin = bytes.NewReader(req.Stdin)
	}
	res, err := h.run.Run(ctx, e.containerID, cmd)
	live.Close(exechost.LiveStreamCloseWait)
	out := &exechost.ExecResult{
		ExitCode: res.ExitCode, Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Duration: res.Duration,
		TimedOut: res.TimedOut, Truncated: res.Truncated, Aborted: res.Aborted,
	}
	if res.Destroyed {
		h.lost(e)
	}
	switch {
	case errors.Is(err, runner.ErrContainerGone):
		h.lost(e)
		return out, fmt.Errorf("exec %s: %w: %w", id, exechost.ErrTerminated, err)
	case err != nil:
		return out, fmt.Errorf("exec %s: %w", id, err)
	}
	if e.terminated.Load() {
		// Terminate removed the container under the command: the exit the
		// runner saw (137) is the removal's, not the tool's.
		return out, fmt.Errorf("exec %s: sandbox removed: %w", id, exechost.ErrTerminated)
	}
	if res.ExitCode == 137 {
		out.OOMKilled = h.oomKilled(ctx, e)
	}
	return out, nil
}

// oomKilled reports whether the kernel's OOM killer acted in the sandbox
// since the last check. Docker's State.OOMKilled only covers PID 1, so the
// memory cgroup's own counter is read from inside (cgroup v1 or v2).
func (h *Host) oomKilled(ctx context.Context, e *execution) bool {
	var out bytes.Buffer
	res, err := h.run.Run(ctx, e.containerID, runner.Command{
		Argv: []string{"cat", "/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"},
		User: h.policy.User(), WorkDir: policy.WorkspaceDir, Stdout: &out, MaxOutput: 16 << 10, Timeout: 10 * time.Second,
	})
	if err != nil {
		if res.Destroyed {
			h.lost(e)
		}
		return false
	}
	n, ok := parseOOMKills(out.String())
	if !ok {
		ins, err := h.c.ContainerInspect(ctx, e.containerID)
		return err == nil && ins.State != nil && ins.State.OOMKilled
	}
	killed := n > e.oomKills
	e.oomKills = n
	return killed
}
