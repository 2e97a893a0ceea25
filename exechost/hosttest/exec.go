package hosttest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/agentflow/agentflow/exechost"
)

// Exec implements exechost.ExecutionHost. A context that is already done
// runs nothing and leaves the sandbox alone (nothing was started that needs
// killing); a context that ends while the handler runs destroys the sandbox
// and returns ErrAborted, as on the Docker host.
func (f *Fake) Exec(ctx context.Context, id exechost.ExecutionID, req exechost.ExecRequest) (*exechost.ExecResult, error) {
	if err := f.rules.ValidateExec(req); err != nil {
		return nil, fmt.Errorf("exec %s: %w", id, err)
	}
	e, err := f.acquire(id)
	if err != nil {
		return nil, fmt.Errorf("exec %s: %w", id, err)
	}
	defer e.mu.Unlock()
	defer f.enter(e)()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("exec %s: %w", id, err)
	}
	remaining := time.Until(e.deadline)
	if remaining <= 0 {
		f.end(e, false)
		return nil, fmt.Errorf("exec %s: sandbox deadline passed: %w", id, exechost.ErrTimeout)
	}
	timeout := req.Timeout
	if timeout == 0 || timeout > remaining {
		timeout = remaining
	}

	out := newOutput(e.resources.MaxOutputBytes)
	// As on the Docker host: stderr within the cap also goes live to the
	// caller's writer, which has it all when Exec returns.
	out.live = exechost.NewLiveStream(req.Stderr)
	defer out.live.Close(exechost.LiveStreamCloseWait)
	env := maps.Clone(e.env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, req.Env)
	maps.Copy(env, req.Secrets)
	x := ExecContext{
		ExecutionID: id,
		Argv:        append([]string(nil), req.Command...),
		Stdin:       append([]byte(nil), req.Stdin...),
		Env:         env,
		Secrets:     maps.Clone(req.Secrets),
		Workspace:   e.ws,
		Stdout:      streamWriter{o: out, buf: &out.stdout},
		Stderr:      streamWriter{o: out, buf: &out.stderr, live: true},
	}
	// The handler's context ends only when this Exec decides the process
	// must die, so the reason is always known here.
	hctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	done := make(chan Result, 1)
	start := time.Now()
	go func() { done <- f.handler(hctx, x) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()

	res := &exechost.ExecResult{ExitCode: -1}
	var why error
	returned := false
	select {
	case r := <-done:
		returned = true
		if e.isKilled() {
			// The sandbox went away under the command (the handler saw its
			// workspace die): its exit is the removal's, not the tool's.
			res.TimedOut, why = e.killedWhy()
			break
		}
		_, _ = x.Stdout.Write(r.Stdout)
		_, _ = x.Stderr.Write(r.Stderr)
		if out.overflowed() {
			res.Truncated = true
			why = fmt.Errorf("more than %d bytes of output: %w", out.limit, exechost.ErrOutputLimit)
			break
		}
		res.ExitCode, res.OOMKilled = r.ExitCode, r.OOMKilled
		res.Stdout, res.Stderr = out.close()
		res.Duration = time.Since(start)
		return res, nil
	case <-out.over:
		res.Truncated = true
		why = fmt.Errorf("more than %d bytes of output: %w", out.limit, exechost.ErrOutputLimit)
	case <-timer.C:
		res.TimedOut = true
		why = fmt.Errorf("after %s: %w", timeout, exechost.ErrTimeout)
	case <-ctx.Done():
		res.Aborted = true
		why = fmt.Errorf("%w: %w", exechost.ErrAborted, context.Cause(ctx))
	case <-e.killed:
		res.TimedOut, why = e.killedWhy()
	}
	// The whole sandbox goes, not only this process; then wait for the
	// handler so nothing it does outlives the call.
	f.end(e, false)
	stop()
	if !returned {
		<-done
	}
	res.Stdout, res.Stderr = out.close()
	res.Duration = time.Since(start)
	return res, fmt.Errorf("exec %s: %w", id, why)
}

func (e *execution) isKilled() bool {
	select {
	case <-e.killed:
		return true
	default:
		return false
	}
}

// killedWhy says why a sandbox destroyed by someone else ended an Exec.
func (e *execution) killedWhy() (timedOut bool, why error) {
	if e.expired.Load() {
		return true, fmt.Errorf("sandbox deadline passed: %w", exechost.ErrTimeout)
	}
	return false, fmt.Errorf("sandbox removed: %w", exechost.ErrTerminated)
}

// output collects stdout and stderr against one combined cap.
type output struct {
	mu             sync.Mutex
	limit          int64
	n              int64
	stdout, stderr bytes.Buffer
	closed         bool
	over           chan struct{}
	overOnce       sync.Once
	live           *exechost.LiveStream // stderr's live copy (nil: none)
}

func newOutput(limit int64) *output { return &output{limit: limit, over: make(chan struct{})} }

var errClosed = fmt.Errorf("output closed: %w", exechost.ErrTerminated)

func (o *output) write(buf *bytes.Buffer, p []byte, live bool) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return 0, errClosed
	}
	keep, err := p, error(nil)
	if o.limit > 0 && o.n+int64(len(p)) > o.limit {
		keep, err = p[:o.limit-o.n], exechost.ErrOutputLimit
		o.overOnce.Do(func() { close(o.over) })
	}
	buf.Write(keep)
	o.n += int64(len(keep))
	if live {
		_, _ = o.live.Write(keep) // queues; never blocks, never fails
	}
	return len(keep), err
}

func (o *output) overflowed() bool {
	select {
	case <-o.over:
		return true
	default:
		return false
	}
}

// close stops further writes and returns copies of both streams.
func (o *output) close() (stdout, stderr []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	return bytes.Clone(o.stdout.Bytes()), bytes.Clone(o.stderr.Bytes())
}

type streamWriter struct {
	o    *output
	buf  *bytes.Buffer
	live bool // also to the output's live stream
}

func (w streamWriter) Write(p []byte) (int, error) { return w.o.write(w.buf, p, w.live) }

// Probe runs argv on a live sandbox with DefaultHandler, outside the
// Exec/Checkpoint serialisation, as `docker exec` behind the host's back
// would: the contract suite uses it to watch and release a running Exec.
// It has no output cap and no timeout but ctx.
func (f *Fake) Probe(ctx context.Context, id exechost.ExecutionID, argv []string) (Result, error) {
	f.mu.Lock()
	e, ok := f.execs[id]
	f.mu.Unlock()
	if !ok {
		return Result{}, fmt.Errorf("probe %s: %w", id, exechost.ErrNotFound)
	}
	out := newOutput(0)
	r := DefaultHandler(ctx, ExecContext{
		ExecutionID: id, Argv: argv, Env: maps.Clone(e.env), Workspace: e.ws,
		Stdout: streamWriter{o: out, buf: &out.stdout}, Stderr: streamWriter{o: out, buf: &out.stderr},
	})
	stdout, stderr := out.close()
	r.Stdout, r.Stderr = append(stdout, r.Stdout...), append(stderr, r.Stderr...)
	if err := ctx.Err(); err != nil {
		return r, fmt.Errorf("probe %s: %w", id, err)
	}
	return r, nil
}
