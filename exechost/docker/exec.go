package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/errdefs"

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
		Env:       append(policy.MergeEnv(e.env, policy.ExecEnv(req)), e.proxyEnv...),
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
	// A pooled sandbox's first command starts through its prepared
	// launcher; every other runs as its own exec.
	res, err := h.run.RunPrepared(ctx, e.launch.Swap(nil), e.containerID, cmd)
	if res.Launched {
		h.pool.countLaunched()
	}
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
		ours := e.terminated.Load() // Terminate removed it under the command
		h.lost(e)
		if ours {
			return out, fmt.Errorf("exec %s: sandbox removed: %w: %w", id, exechost.ErrTerminated, err)
		}
		return out, h.goneFromOutside(id, e, "container gone", err)
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
	if res.ExitCode > 128 && !out.OOMKilled {
		// A tool killed with its sandbox (docker kill, docker rm -f, a
		// daemon restart) dies of a signal like a tool that crashed: the
		// container's state tells them apart. The sandbox is gone, so
		// this is a lost sandbox, not the tool's failure, and nothing
		// (a checkpoint) may run in it any more.
		if how, gone := h.destroyedFromOutside(ctx, e); gone {
			h.lost(e)
			return out, h.goneFromOutside(id, e, fmt.Sprintf("exit %d; container %s", res.ExitCode, how), nil)
		}
	}
	return out, nil
}

// goneFromOutside is the error of an exec whose sandbox ended without this
// host ending it: the in-container runtime deadline if it has passed, else
// someone outside (docker kill, docker rm -f, a daemon restart). Either way
// ErrTerminated: the sandbox is lost, the tool did not fail.
func (h *Host) goneFromOutside(id exechost.ExecutionID, e *execution, detail string, cause error) error {
	what := "sandbox container was killed from outside"
	if !time.Now().Before(e.deadline) {
		what = "sandbox reached its runtime deadline"
	}
	if cause != nil {
		return fmt.Errorf("exec %s: %s (%s): %w: %w", id, what, detail, exechost.ErrTerminated, cause)
	}
	return fmt.Errorf("exec %s: %s (%s): %w", id, what, detail, exechost.ErrTerminated)
}

// stopSettle bounds how long a signal death waits for the daemon to record
// the container's end: the exec's exit is seen moments before the
// container's state changes. Only tools dying of a signal pay it, once.
const stopSettle = 2 * time.Second

// destroyedFromOutside reports whether e's container stopped or went away
// without this host doing it, and how it looks now ("stopped", "removed":
// a killed sandbox is auto-removed, so a docker kill often looks like a
// docker rm -f by the time it is inspected). A container the
// kernel's OOM killer stopped is not: that is the tool's memory. When the
// daemon cannot say, the exit stands as the tool's.
func (h *Host) destroyedFromOutside(ctx context.Context, e *execution) (string, bool) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopSettle)
	waitCh, errCh := h.c.ContainerWait(wctx, e.containerID, container.WaitConditionNotRunning)
	select {
	case <-waitCh:
	case err := <-errCh:
		if errdefs.IsNotFound(err) {
			cancel()
			return "removed", true
		}
	}
	cancel()
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	ins, err := h.c.ContainerInspect(ictx, e.containerID)
	switch {
	case errdefs.IsNotFound(err):
		return "removed", true
	case err != nil || ins.State == nil:
		return "", false
	case ins.State.Status == container.StateRemoving:
		return "removed", true
	case ins.State.Running:
		return "", false
	case ins.State.OOMKilled:
		return "", false
	}
	return "stopped", true
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
