package hosttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/exechost"
)

// ExecContext is what a Handler sees of one Exec: the process's view.
type ExecContext struct {
	ExecutionID exechost.ExecutionID
	Argv        []string
	Stdin       []byte
	// Env is the process environment: provision Env, then ExecRequest.Env,
	// then Secrets (as the Docker host exports them).
	Env map[string]string
	// Secrets is the part of Env that came from ExecRequest.Secrets.
	Secrets   map[string]string
	Workspace *Workspace
	// Stdout and Stderr count together against MaxOutputBytes. A write that
	// passes the cap, or any write once the sandbox is destroyed, fails: a
	// handler should then stop, as a process stops when its container goes.
	Stdout, Stderr io.Writer
}

// Result is what a Handler's process did. Stdout and Stderr are written
// after anything the handler already wrote to ExecContext.Stdout/Stderr,
// through the same cap. Timeouts, truncation and aborts are the Fake's to
// decide, not the handler's.
type Result struct {
	ExitCode       int
	Stdout, Stderr []byte
	OOMKilled      bool
}

// Handler plays the process of one Exec. It must return promptly once ctx
// is done (the sandbox is being destroyed); the Fake waits for it.
type Handler func(ctx context.Context, x ExecContext) Result

// DefaultHandler implements the Cmd vocabulary; any other command exits 127
// as a shell would for an unknown program. Wrap it to script tools:
//
//	func(ctx context.Context, x hosttest.ExecContext) hosttest.Result {
//		if x.Argv[0] == "/bin/tool" { ... }
//		return hosttest.DefaultHandler(ctx, x)
//	}
func DefaultHandler(ctx context.Context, x ExecContext) Result {
	name, args, ok := parse(x.Argv)
	if !ok {
		return Result{ExitCode: 127, Stderr: fmt.Appendf(nil, "hosttest: %q: command not found\n", x.Argv)}
	}
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	fail := func(err error) Result {
		return Result{ExitCode: 1, Stderr: fmt.Appendf(nil, "%s: %v\n", name, err)}
	}
	switch name {
	case opWrite:
		if err := x.Workspace.WriteFile(arg(0), []byte(arg(1)), 0); err != nil {
			return fail(err)
		}
	case opAppend:
		if err := x.Workspace.AppendFile(arg(0), []byte(arg(1))); err != nil {
			return fail(err)
		}
	case opSymlink:
		if err := x.Workspace.Symlink(arg(0), arg(1)); err != nil {
			return fail(err)
		}
	case opCat:
		b, err := x.Workspace.ReadFile(arg(0))
		if err != nil {
			return fail(err)
		}
		return Result{Stdout: b}
	case opEcho:
		return Result{Stdout: x.Stdin}
	case opSleep:
		secs, err := strconv.ParseFloat(arg(0), 64)
		if err != nil {
			return fail(err)
		}
		t := time.NewTimer(time.Duration(secs * float64(time.Second)))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return Result{ExitCode: 143} // SIGTERM
		}
	case opFlood:
		chunk := []byte(strings.Repeat("y\n", 4096))
		for ctx.Err() == nil {
			if _, err := x.Stdout.Write(chunk); err != nil {
				return Result{ExitCode: 141} // SIGPIPE
			}
		}
		return Result{ExitCode: 143}
	case opExit:
		code, err := strconv.Atoi(arg(0))
		if err != nil {
			return fail(err)
		}
		return Result{ExitCode: code & 0xff, Stderr: []byte(arg(1))}
	case opPrintEnv:
		v, ok := x.Env[arg(0)]
		if !ok {
			return Result{ExitCode: 1}
		}
		return Result{Stdout: []byte(v + "\n")}
	case opStderrGated:
		if _, err := io.WriteString(x.Stderr, arg(0)); err != nil {
			return Result{ExitCode: 141}
		}
		if err := x.Workspace.WaitFor(ctx, arg(1)); err != nil {
			if errors.Is(err, fs.ErrInvalid) || errors.Is(err, fs.ErrPermission) {
				return fail(err)
			}
			return Result{ExitCode: 143}
		}
		return Result{Stderr: []byte(arg(2))}
	case opGated:
		if err := x.Workspace.AppendFile(arg(0), []byte("start\n")); err != nil {
			return fail(err)
		}
		if err := x.Workspace.WaitFor(ctx, arg(1)); err != nil {
			if errors.Is(err, fs.ErrInvalid) || errors.Is(err, fs.ErrPermission) {
				return fail(err)
			}
			return Result{ExitCode: 143}
		}
		if err := x.Workspace.AppendFile(arg(0), []byte("end\n")); err != nil {
			return fail(err)
		}
	}
	return Result{}
}
