package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

const childFlag = "--testtool-child"

var (
	osArgs    = func() []string { return os.Args }
	lookupEnv = os.LookupEnv
)

func seconds(n toolkit.Number, def int) time.Duration {
	return time.Duration(n.Int(def)) * time.Second
}

func modeSleep(ctx context.Context, env toolkit.Env, in input) (any, error) {
	d := seconds(in.Seconds, 60)
	if in.IgnoreTerm {
		// Undo toolkit.Main's handler, then ignore: only SIGKILL stops us.
		signal.Reset(syscall.SIGTERM)
		signal.Ignore(syscall.SIGTERM)
		ctx = context.Background()
	}
	fmt.Fprintf(env.Stderr, "testtool: sleeping %s (ignore_term=%v)\n", d, in.IgnoreTerm)
	select {
	case <-time.After(d):
		return map[string]any{"slept_seconds": d.Seconds()}, nil
	case <-ctx.Done():
		return nil, &toolkit.ExitError{Code: 143, Err: errors.New("sleep interrupted by SIGTERM")}
	}
}

func modeSigterm(ctx context.Context, env toolkit.Env, in input) (any, error) {
	d := seconds(in.Seconds, 300)
	fmt.Fprintln(env.Stderr, "testtool: waiting for SIGTERM")
	select {
	case <-ctx.Done():
		fmt.Fprintln(env.Stderr, "testtool: got SIGTERM, exiting 143")
		return nil, &toolkit.ExitError{Code: 143, Err: errors.New("terminated by SIGTERM"), Silent: true}
	case <-time.After(d):
		return map[string]any{"signaled": false}, nil
	}
}

func writeN(w io.Writer, n int, fill byte) (int, error) {
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = fill
	}
	written := 0
	for written < n {
		k, err := w.Write(chunk[:min(len(chunk), n-written)])
		written += k
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

func modeFlood(_ context.Context, env toolkit.Env, in input) (any, error) {
	// stderr first: a runner that caps combined output must cut us off
	// whichever stream carries the flood.
	if _, err := writeN(env.Stderr, in.StderrBytes.Int(0), 'e'); err != nil {
		return nil, fmt.Errorf("flood stderr: %w", err)
	}
	if _, err := writeN(env.Stdout, in.StdoutBytes.Int(0), 'o'); err != nil {
		return nil, fmt.Errorf("flood stdout: %w", err)
	}
	return toolkit.Written{}, nil
}

func modeForkBomb(_ context.Context, env toolkit.Env, in input) (any, error) {
	limit := in.Max.Int(100000)
	hold := seconds(in.HoldSeconds, 5)
	sleeper, err := sleeperCommand()
	if err != nil {
		return nil, err
	}
	var kids []*os.Process
	var forkErr error
	for len(kids) < limit {
		cmd := exec.Command(sleeper[0], append(sleeper[1:], fmt.Sprint(int(hold.Seconds())+60))...)
		if err := cmd.Start(); err != nil {
			forkErr = err
			break
		}
		kids = append(kids, cmd.Process)
	}
	fmt.Fprintf(env.Stderr, "testtool: spawned %d children, stopped by: %v\n", len(kids), forkErr)
	time.Sleep(hold) // keep the pids occupied so the limit is observable
	for _, k := range kids {
		_ = k.Kill()
		_, _ = k.Wait()
	}
	out := map[string]any{"spawned": len(kids), "limited": forkErr != nil}
	if forkErr != nil {
		out["fork_error"] = forkErr.Error()
	}
	return out, nil
}

func modeMemHog(_ context.Context, env toolkit.Env, in input) (any, error) {
	mib := in.MiB.Int(64)
	chunks := make([][]byte, 0, mib)
	for i := 0; i < mib; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = byte(i) // touch every page so it is really resident
		}
		chunks = append(chunks, b)
		if (i+1)%64 == 0 {
			fmt.Fprintf(env.Stderr, "testtool: %d MiB allocated\n", i+1)
		}
	}
	return map[string]any{"allocated_mib": len(chunks)}, nil
}

func modeDiskFill(_ context.Context, env toolkit.Env, in input) (any, error) {
	maxBytes := in.MaxMiB.Int(0) << 20
	root, err := env.OpenWorkspace()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Create("fill.bin")
	if err != nil {
		return nil, fmt.Errorf("create fill.bin: %w", err)
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i) // not zeros: no sparse or compressible shortcut
	}
	var written int64
	var werr error
	for maxBytes == 0 || written < int64(maxBytes) {
		n, err := f.Write(chunk)
		written += int64(n)
		if err != nil {
			werr = err
			break
		}
	}
	_ = f.Close()
	if in.Remove {
		_ = root.Remove("fill.bin")
	}
	out := map[string]any{"bytes_written": written, "enospc": errors.Is(werr, syscall.ENOSPC)}
	if werr != nil {
		out["write_error"] = werr.Error()
	}
	return out, nil
}

func modeBackground(_ context.Context, env toolkit.Env, in input) (any, error) {
	sleeper, err := sleeperCommand()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(sleeper[0], append(sleeper[1:], fmt.Sprint(in.Seconds.Int(300)))...)
	// The child inherits our stdout and stderr and lives in its own session,
	// so it outlives us and keeps the pipes open.
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start background child: %w", err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release() // never waited for: it is meant to outlive us
	return map[string]any{"child_pid": pid}, nil
}

// sleeperCommand prefers the image's tiny single-threaded sleep (a fork bomb
// of Go runtimes would hit the memory limit before the pids limit) and falls
// back to this binary's hidden child role where there is none.
func sleeperCommand() ([]string, error) {
	if p, err := exec.LookPath("sleep"); err == nil {
		return []string{p}, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find a sleep binary: %w", err)
	}
	return []string{self, childFlag, "sleep"}, nil
}

// runChild is the hidden child role: "--testtool-child sleep N".
func runChild() {
	args := osArgs()
	if len(args) >= 4 && args[2] == "sleep" {
		var n int
		_, _ = fmt.Sscan(args[3], &n)
		time.Sleep(time.Duration(n) * time.Second)
	}
	os.Exit(0)
}

// modeTrickle writes stderr lines slowly: the live-log tests follow them
// while the tool runs. With a gate, the tool cannot end before whoever
// watches line 1 creates the gate file (synchronisation on content, not
// time).
func modeTrickle(ctx context.Context, env toolkit.Env, in input) (any, error) {
	n := in.Lines.Int(5)
	interval := time.Duration(in.Seconds.Int(1)) * time.Second
	msg := in.Message
	if msg == "" {
		msg = "trickle"
	}
	for i := 1; i <= n; i++ {
		if i > 1 {
			select {
			case <-time.After(interval):
			case <-ctx.Done():
				return nil, &toolkit.ExitError{Code: 143, Err: errors.New("trickle interrupted by SIGTERM")}
			}
		}
		fmt.Fprintf(env.Stderr, "%s line %d/%d\n", msg, i, n)
		if i == 1 && in.Gate != "" {
			gate := filepath.Join(env.Workspace, filepath.Clean("/"+in.Gate))
			for {
				if _, err := os.Stat(gate); err == nil {
					break
				}
				select {
				case <-time.After(50 * time.Millisecond):
				case <-ctx.Done():
					return nil, &toolkit.ExitError{Code: 143, Err: errors.New("trickle interrupted by SIGTERM")}
				}
			}
		}
	}
	return map[string]any{"lines": n}, nil
}
