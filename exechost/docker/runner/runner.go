// Package runner runs one process in a sandbox container through the Docker
// exec API: stdin, a deadline, abort, and a cap on combined stdout+stderr.
// When a command times out, overflows its cap or is aborted, the runner
// destroys the whole container: the docker exec client going away does not
// stop the process, and a half-killed sandbox is worth nothing.
package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/agentflow/agentflow/exechost"
)

// Client is the part of the Docker client the runner uses.
type Client interface {
	ContainerExecCreate(ctx context.Context, containerID string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecAttach(ctx context.Context, execID string, config container.ExecAttachOptions) (types.HijackedResponse, error)
	ContainerExecStart(ctx context.Context, execID string, config container.ExecStartOptions) error
	ContainerExecInspect(ctx context.Context, execID string) (container.ExecInspect, error)
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
}

// ErrContainerGone: the container disappeared (removed, or its runtime
// deadline ended it) while or before the command ran.
var ErrContainerGone = errors.New("container gone")

// ErrNoUser: a command did not name its user. Without one, docker exec runs
// as the container's configured user, which is the deadline keeper (PID 1):
// a process as that uid could stop the keeper. Every command says who it is.
var ErrNoUser = errors.New("exec without a user: refused")

// Command is one process to run.
type Command struct {
	Argv    []string
	Env     []string
	User    string // numeric uid:gid; required (ErrNoUser)
	WorkDir string
	// Stdin is copied to the process and then closed; nil means no stdin.
	// A read error from Stdin (not the process refusing input) aborts the
	// command and destroys the container.
	Stdin io.Reader
	// Stdout and Stderr receive the demultiplexed streams (nil discards). A
	// write error aborts the command and destroys the container.
	Stdout, Stderr io.Writer
	// MaxOutput caps stdout+stderr together; <= 0 means no cap.
	MaxOutput int64
	// Timeout bounds the command; <= 0 means only ctx bounds it.
	Timeout time.Duration
}

// Result is what happened. When Destroyed is set the container was removed
// and Run also returned an error saying why.
type Result struct {
	ExitCode  int
	Duration  time.Duration
	TimedOut  bool
	Truncated bool
	Aborted   bool
	Destroyed bool
	// Launched: the command started through a prepared launcher
	// (RunPrepared), not an exec of its own.
	Launched bool
}

// Options tune a Runner; zero values take defaults.
type Options struct {
	// Grace is how long tools get between SIGTERM and the container's
	// removal (default 5 s).
	Grace time.Duration
	// Poll is how often a running exec is inspected, which is how a tool
	// whose children keep stdout open is noticed to have exited (default
	// 250 ms).
	Poll time.Duration
	// Drain is how long output may still arrive after the process exited
	// before the stream is cut (default 250 ms).
	Drain  time.Duration
	Logger *slog.Logger
}

// Runner runs commands. It holds no per-container state and is safe for
// concurrent use; callers serialise commands per container if they need to.
type Runner struct {
	c    Client
	opts Options
}

// New returns a Runner.
func New(c Client, opts Options) *Runner {
	if opts.Grace <= 0 {
		opts.Grace = 5 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = 250 * time.Millisecond
	}
	if opts.Drain <= 0 {
		opts.Drain = 250 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Runner{c: c, opts: opts}
}

var errOverflow = errors.New("output cap reached")

// sinkError marks a failure of the caller's Stdout/Stderr writer, so it is
// told apart from the stream itself breaking.
type sinkError struct{ err error }

func (e *sinkError) Error() string { return e.err.Error() }
func (e *sinkError) Unwrap() error { return e.err }

// capped counts both streams against one limit.
type capped struct {
	limit int64
	n     int64
}

type cappedWriter struct {
	c *capped
	w io.Writer
}

func (cw cappedWriter) Write(p []byte) (int, error) {
	c := cw.c
	over := false
	if c.limit > 0 && c.n+int64(len(p)) > c.limit {
		p, over = p[:c.limit-c.n], true
	}
	c.n += int64(len(p))
	if cw.w != nil && len(p) > 0 {
		if _, err := cw.w.Write(p); err != nil {
			return 0, &sinkError{err}
		}
	}
	if over {
		return len(p), errOverflow
	}
	return len(p), nil
}

// Run executes cmd in the container and waits for it.
func (r *Runner) Run(ctx context.Context, containerID string, cmd Command) (Result, error) {
	start := time.Now()
	if cmd.User == "" {
		return Result{ExitCode: -1}, fmt.Errorf("exec %v in %s: %w", cmd.Argv, containerID, ErrNoUser)
	}
	execID, hj, err := r.start(ctx, containerID, container.ExecOptions{
		User:         cmd.User,
		WorkingDir:   cmd.WorkDir,
		Env:          cmd.Env,
		Cmd:          cmd.Argv,
		AttachStdin:  cmd.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return Result{ExitCode: -1}, err
	}
	return r.wait(ctx, containerID, execID, hj, cmd, start, nil)
}

// start creates and starts an exec, attached.
func (r *Runner) start(ctx context.Context, containerID string, o container.ExecOptions) (string, types.HijackedResponse, error) {
	created, err := r.c.ContainerExecCreate(ctx, containerID, o)
	if err != nil {
		return "", types.HijackedResponse{}, classify(fmt.Errorf("create exec in %s: %w", containerID, err))
	}
	hj, err := r.c.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return "", types.HijackedResponse{}, classify(fmt.Errorf("attach exec in %s: %w", containerID, err))
	}
	return created.ID, hj, nil
}

// Prepared is a launcher started ahead of its command (launch.go). It
// serves one command; Close releases one that will not be used (the
// launcher sees its stdin end and exits having run nothing).
type Prepared struct {
	containerID, execID string
	user, workDir       string
	base                []string // the container's own values of shellVars
	hj                  types.HijackedResponse
	once                sync.Once
}

// Close releases p's connection. It is safe to call more than once and
// while p runs a command (which then fails).
func (p *Prepared) Close() {
	if p != nil {
		p.once.Do(p.hj.Close)
	}
}

// PrepareOptions say who a launcher runs as and where.
type PrepareOptions struct {
	User, WorkDir string
	// Env is the container's configured environment (Config.Env), which
	// a plain exec starts from.
	Env []string
	// Warm are files the launcher reads once before it waits, so the
	// command does not pay their first read (through fuse-overlayfs, that
	// is once per container). Missing ones are skipped.
	Warm []string
}

// Prepare starts a launcher in the container for one later RunPrepared.
// It costs the exec a command would cost, now instead of when the command
// is due.
func (r *Runner) Prepare(ctx context.Context, containerID string, o PrepareOptions) (*Prepared, error) {
	if o.User == "" {
		return nil, fmt.Errorf("prepare launcher in %s: %w", containerID, ErrNoUser)
	}
	execID, hj, err := r.start(ctx, containerID, container.ExecOptions{
		User: o.User, WorkingDir: o.WorkDir, Cmd: append(slices.Clone(launcherArgv), o.Warm...),
		AttachStdin: true, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return nil, fmt.Errorf("prepare launcher: %w", err)
	}
	return &Prepared{containerID: containerID, execID: execID, user: o.User, workDir: o.WorkDir, base: baseVars(o.Env), hj: hj}, nil
}

// RunPrepared runs cmd through p, which it uses up, and waits for it, like
// Run. When p is nil, is for another user or directory, cannot carry cmd
// exactly (ErrNotLaunchable) or ended before starting it, cmd runs through
// Run instead: in each of those cases nothing of cmd has run.
func (r *Runner) RunPrepared(ctx context.Context, p *Prepared, containerID string, cmd Command) (Result, error) {
	if p == nil {
		return r.Run(ctx, containerID, cmd)
	}
	if err := ctx.Err(); err != nil {
		// As a plain exec's create would: fail, run nothing, leave the
		// container as it is (the launcher ends when its stdin closes).
		p.Close()
		return Result{ExitCode: -1}, fmt.Errorf("exec in %s: %w", containerID, err)
	}
	start := time.Now()
	line, err := launchLine(cmd, p.base)
	if err == nil && (p.containerID != containerID || p.user != cmd.User || p.workDir != cmd.WorkDir) {
		err = fmt.Errorf("%w: prepared for another container, user or directory", ErrNotLaunchable)
	}
	if err != nil {
		p.Close()
		r.opts.Logger.Debug("exec without the prepared launcher", "container_id", containerID, "reason", err)
		return r.Run(ctx, containerID, cmd)
	}
	gate := &launchGate{line: line}
	res, err := r.wait(ctx, containerID, p.execID, p.hj, cmd, start, gate)
	p.Close()
	if errors.Is(err, errNotLaunched) {
		r.opts.Logger.Debug("prepared launcher did not start the command; exec instead", "container_id", containerID, "reason", err)
		return r.Run(ctx, containerID, cmd)
	}
	res.Launched = gate.launched() // wait's goroutines have ended
	return res, err
}

// wait feeds and reads a started exec until it ends, the deadline passes,
// ctx ends or a stream fails. With a gate it is a prepared launcher's: the
// gate's line goes first on stdin, and the gate strips the marker from
// stdout and holds stderr until it. Its goroutines have ended when it
// returns.
func (r *Runner) wait(ctx context.Context, containerID, execID string, hj types.HijackedResponse, cmd Command, start time.Time, gate *launchGate) (Result, error) {
	res := Result{ExitCode: -1}
	var closeOnce sync.Once
	closeConn := func() { closeOnce.Do(hj.Close) }

	var wg sync.WaitGroup
	defer wg.Wait()
	defer closeConn()

	outCh := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := &capped{limit: cmd.MaxOutput}
		var stdout, stderr io.Writer = cappedWriter{c, cmd.Stdout}, cappedWriter{c, cmd.Stderr}
		if gate != nil {
			gate.stdout, gate.stderr = stdout, stderr
			stdout, stderr = gateStdout{gate}, gateStderr{gate}
		}
		_, err := stdcopy.StdCopy(stdout, stderr, hj.Reader)
		outCh <- err
		if err != nil {
			// Keep reading (and dropping) until the connection is closed: a
			// daemon blocked writing to us delays the container's removal.
			_, _ = io.Copy(io.Discard, hj.Reader)
		}
	}()
	inCh := make(chan error, 1)
	stdin := cmd.Stdin
	if gate != nil {
		// A launcher's stdin is always attached: the line, then the
		// command's input, then EOF (a plain exec without Stdin has none).
		stdin = bytes.NewReader(gate.line)
		if cmd.Stdin != nil {
			stdin = io.MultiReader(stdin, cmd.Stdin)
		}
	}
	if stdin != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inCh <- copyStdin(hj, stdin)
		}()
	}

	var deadline <-chan time.Time
	if cmd.Timeout > 0 {
		t := time.NewTimer(cmd.Timeout)
		defer t.Stop()
		deadline = t.C
	}
	poll := time.NewTimer(r.opts.Poll)
	defer poll.Stop()

	finish := func(why error) (Result, error) {
		res.Duration = time.Since(start)
		return res, why
	}
	destroy := func(why error) (Result, error) {
		res.Destroyed = true
		r.destroy(ctx, containerID, cmd.User, execID, outCh)
		closeConn()
		return finish(fmt.Errorf("exec in %s: %w", containerID, why))
	}
	// streamResult decides what a finished output stream means.
	streamResult := func(err error) error {
		var se *sinkError
		switch {
		case errors.Is(err, errOverflow):
			res.Truncated = true
			return fmt.Errorf("more than %d bytes of output: %w", cmd.MaxOutput, exechost.ErrOutputLimit)
		case errors.As(err, &se):
			res.Aborted = true
			return fmt.Errorf("output sink: %w: %w", exechost.ErrAborted, se.err)
		case errors.Is(err, errLaunchProtocol):
			return err
		}
		return nil
	}

	streamDone := false
	for {
		select {
		case err := <-outCh:
			outCh = nil
			streamDone = true
			if why := streamResult(err); why != nil {
				return destroy(why)
			}
			// Normally the process has exited; inspect right away.
		case err := <-inCh:
			inCh = nil
			if err != nil {
				res.Aborted = true
				return destroy(fmt.Errorf("stdin: %w: %w", exechost.ErrAborted, err))
			}
			continue
		case <-deadline:
			res.TimedOut = true
			return destroy(fmt.Errorf("after %s: %w", cmd.Timeout, exechost.ErrTimeout))
		case <-ctx.Done():
			res.Aborted = true
			return destroy(fmt.Errorf("%w: %w", exechost.ErrAborted, context.Cause(ctx)))
		case <-poll.C:
		}

		ins, err := r.c.ContainerExecInspect(context.WithoutCancel(ctx), execID)
		if err != nil {
			return finish(classify(fmt.Errorf("inspect exec in %s: %w", containerID, err)))
		}
		if ins.Running {
			next := r.opts.Poll
			if streamDone {
				next = 10 * time.Millisecond // output ended, exit status is moments away
			}
			poll.Reset(next)
			continue
		}
		res.ExitCode = ins.ExitCode
		if !streamDone {
			// The process exited but something it started still holds
			// stdout: take what arrives shortly, then stop listening.
			drain := time.NewTimer(r.opts.Drain)
			select {
			case err := <-outCh:
				drain.Stop()
				outCh = nil
				if why := streamResult(err); why != nil {
					return destroy(why)
				}
			case <-drain.C:
				r.opts.Logger.Debug("exec exited with output still open; cut the stream",
					"container_id", containerID, "exec_id", execID)
				closeConn()
			}
		}
		if gate != nil {
			closeConn()
			wg.Wait() // the gate is the output goroutine's until it ends
			if !gate.launched() {
				return finish(fmt.Errorf("%w (exit %d: %q)", errNotLaunched, res.ExitCode, truncate(gate.held, 200)))
			}
		}
		return finish(nil)
	}
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// copyStdin feeds the process and closes its stdin. Only a failure to read
// the source is reported: a process that exits without reading its input is
// not an error of the input.
func copyStdin(hj types.HijackedResponse, src io.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, werr := hj.Conn.Write(buf[:n]); werr != nil {
				return nil
			}
		}
		if errors.Is(rerr, io.EOF) {
			_ = hj.CloseWrite()
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// destroy asks the tools to stop, gives them the grace period, then removes
// the container. It runs on a context detached from ctx so an aborted
// caller still gets its sandbox destroyed.
func (r *Runner) destroy(ctx context.Context, containerID, user, execID string, outCh <-chan error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.Grace+30*time.Second)
	defer cancel()
	log := r.opts.Logger.With("container_id", containerID)

	// kill -1 signals every process the sandbox user may signal except
	// kill itself; PID 1 (the deadline keeper) has its own uid and is not
	// one of them.
	if k, err := r.c.ContainerExecCreate(cctx, containerID, container.ExecOptions{
		User: user, Cmd: []string{"kill", "-TERM", "-1"},
	}); err == nil {
		if err := r.c.ContainerExecStart(cctx, k.ID, container.ExecStartOptions{Detach: true}); err != nil {
			log.Debug("sigterm exec failed", "error", err)
		}
	} else {
		log.Debug("sigterm exec not created", "error", err)
	}

	grace := time.NewTimer(r.opts.Grace)
	defer grace.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-grace.C:
			break wait
		case <-outCh:
			outCh = nil
		case <-tick.C:
			ins, err := r.c.ContainerExecInspect(cctx, execID)
			if err != nil || !ins.Running {
				break wait
			}
		}
	}
	err := r.c.ContainerRemove(cctx, containerID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !errdefs.IsNotFound(err) && !errdefs.IsConflict(err) {
		// Conflict: removal already in progress (auto-remove).
		log.Warn("remove sandbox", "error", err)
	}
}

// classify maps "the container is not there / not running" to
// ErrContainerGone so callers can tell a lost sandbox from a broken daemon.
func classify(err error) error {
	if errdefs.IsNotFound(err) || errdefs.IsConflict(err) {
		return fmt.Errorf("%w: %w", ErrContainerGone, err)
	}
	return err
}
