package runner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentflow/agentflow/exechost"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		launchHelper() // launch_test.go: this binary as the command
	}
	goleak.VerifyTestMain(m)
}

// proc is the fake process behind one exec.
type proc struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	term           <-chan struct{} // closed on SIGTERM (kill -1)
	killed         <-chan struct{} // closed when the container is removed
}

// script plays a process; it returns its exit code. holdOpen keeps stdout
// open after exit, like a background child would.
type script struct {
	run      func(p proc) int
	holdOpen bool
}

type fakeConn struct {
	io.Reader
	inW    *io.PipeWriter
	outR   *io.PipeReader
	closed sync.Once
}

func (c *fakeConn) Write(p []byte) (int, error)      { return c.inW.Write(p) }
func (c *fakeConn) CloseWrite() error                { return c.inW.Close() }
func (c *fakeConn) Close() error                     { c.closed.Do(func() { c.inW.Close(); c.outR.Close() }); return nil }
func (c *fakeConn) LocalAddr() net.Addr              { return nil }
func (c *fakeConn) RemoteAddr() net.Addr             { return nil }
func (c *fakeConn) SetDeadline(time.Time) error      { return nil }
func (c *fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fakeConn) SetWriteDeadline(time.Time) error { return nil }

type fakeClient struct {
	t         *testing.T
	script    script
	createErr error

	mu       sync.Mutex
	running  bool
	exit     int
	execs    [][]string
	removed  int
	term     chan struct{}
	killed   chan struct{}
	outW     *io.PipeWriter
	procDone chan struct{}
}

func newFake(t *testing.T, s script) *fakeClient {
	f := &fakeClient{t: t, script: s, term: make(chan struct{}), killed: make(chan struct{}), procDone: make(chan struct{})}
	t.Cleanup(func() {
		f.mu.Lock()
		started := f.outW != nil
		f.mu.Unlock()
		if started {
			<-f.procDone // the fake process goroutine always ends
		}
	})
	return f
}

func (f *fakeClient) ContainerExecCreate(_ context.Context, _ string, o container.ExecOptions) (container.ExecCreateResponse, error) {
	if f.createErr != nil {
		return container.ExecCreateResponse{}, f.createErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if o.User == "" {
		f.t.Errorf("exec %v created without a user", o.Cmd)
	}
	f.execs = append(f.execs, o.Cmd)
	return container.ExecCreateResponse{ID: "exec-" + strings.Join(o.Cmd, " ")}, nil
}

func (f *fakeClient) ContainerExecAttach(context.Context, string, container.ExecAttachOptions) (types.HijackedResponse, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	f.mu.Lock()
	f.running, f.outW = true, outW
	f.mu.Unlock()
	go func() {
		defer close(f.procDone)
		code := f.script.run(proc{
			stdin:  inR,
			stdout: stdcopy.NewStdWriter(outW, stdcopy.Stdout),
			stderr: stdcopy.NewStdWriter(outW, stdcopy.Stderr),
			term:   f.term, killed: f.killed,
		})
		inR.Close()
		f.mu.Lock()
		f.running, f.exit = false, code
		f.mu.Unlock()
		if !f.script.holdOpen {
			outW.Close()
		}
	}()
	conn := &fakeConn{Reader: outR, inW: inW, outR: outR}
	return types.NewHijackedResponse(conn, ""), nil
}

func (f *fakeClient) ContainerExecStart(_ context.Context, id string, o container.ExecStartOptions) error {
	if id == "exec-kill -TERM -1" {
		f.mu.Lock()
		select {
		case <-f.term:
		default:
			close(f.term)
		}
		f.mu.Unlock()
	}
	return nil
}

func (f *fakeClient) ContainerExecInspect(_ context.Context, id string) (container.ExecInspect, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return container.ExecInspect{ExecID: id, Running: f.running, ExitCode: f.exit}, nil
}

func (f *fakeClient) ContainerRemove(context.Context, string, container.RemoveOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed++
	if f.removed == 1 {
		close(f.killed)
		if f.outW != nil {
			f.outW.CloseWithError(errors.New("container removed"))
		}
	}
	return nil
}

// untilKilled blocks like a process that ignores SIGTERM.
func untilKilled(p proc) int { <-p.killed; return 137 }

func fastRunner(c Client) *Runner {
	return New(c, Options{Grace: 50 * time.Millisecond, Poll: 5 * time.Millisecond, Drain: 20 * time.Millisecond})
}

func TestRunOK(t *testing.T) {
	f := newFake(t, script{run: func(p proc) int {
		in, _ := io.ReadAll(p.stdin)
		io.WriteString(p.stdout, "out:"+string(in))
		io.WriteString(p.stderr, "log line")
		return 3
	}})
	var stdout, stderr bytes.Buffer
	res, err := fastRunner(f).Run(t.Context(), "c1", Command{
		User: tool, Argv: []string{"/bin/tool"}, Stdin: strings.NewReader(`{"a":1}`), Stdout: &stdout, Stderr: &stderr, MaxOutput: 1 << 10,
	})
	require.NoError(t, err)
	require.Equal(t, 3, res.ExitCode)
	require.False(t, res.Destroyed)
	require.Equal(t, `out:{"a":1}`, stdout.String())
	require.Equal(t, "log line", stderr.String())
	require.Zero(t, f.removed)
}

func TestRunDestroysTheContainer(t *testing.T) {
	flood := func(p proc) int {
		chunk := strings.Repeat("x", 64)
		for {
			select {
			case <-p.killed:
				return 137
			default:
			}
			if _, err := io.WriteString(p.stdout, chunk); err != nil {
				<-p.killed
				return 137
			}
			io.WriteString(p.stderr, chunk)
		}
	}
	tests := []struct {
		name    string
		script  func(proc) int
		cmd     Command
		cancel  bool
		wantErr error
		check   func(t *testing.T, res Result, out *bytes.Buffer)
	}{
		{name: "output cap counts both streams", script: flood, cmd: Command{User: tool, MaxOutput: 100}, wantErr: exechost.ErrOutputLimit,
			check: func(t *testing.T, res Result, out *bytes.Buffer) {
				require.True(t, res.Truncated)
				require.LessOrEqual(t, out.Len(), 100)
			}},
		{name: "timeout", script: untilKilled, cmd: Command{User: tool, Timeout: 20 * time.Millisecond}, wantErr: exechost.ErrTimeout,
			check: func(t *testing.T, res Result, _ *bytes.Buffer) { require.True(t, res.TimedOut) }},
		{name: "abort", script: untilKilled, cancel: true, wantErr: exechost.ErrAborted,
			check: func(t *testing.T, res Result, _ *bytes.Buffer) { require.True(t, res.Aborted) }},
		{name: "sigterm honoured before removal", script: func(p proc) int {
			select {
			case <-p.term:
				return 143
			case <-p.killed:
				return 137
			}
		}, cmd: Command{User: tool, Timeout: 10 * time.Millisecond}, wantErr: exechost.ErrTimeout},
		{name: "stdin source fails", script: func(p proc) int { io.Copy(io.Discard, p.stdin); return untilKilled(p) }, cmd: Command{User: tool, Stdin: io.MultiReader(strings.NewReader("x"), errReader{})},
			wantErr: exechost.ErrAborted},
		{name: "stdout sink fails", script: flood, cmd: Command{User: tool, Stdout: errWriter{}}, wantErr: exechost.ErrAborted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, script{run: tt.script})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var out bytes.Buffer
			cmd := tt.cmd
			cmd.Argv, cmd.User = []string{"/bin/tool"}, tool
			if cmd.Stdout == nil {
				cmd.Stdout, cmd.Stderr = &out, &out
			}
			if tt.cancel {
				go func() {
					// Cancel once the process is known to run.
					for {
						if r, _ := f.ContainerExecInspect(ctx, ""); r.Running {
							cancel()
							return
						}
						runtimeGosched()
					}
				}()
			}
			res, err := fastRunner(f).Run(ctx, "c1", cmd)
			require.ErrorIs(t, err, tt.wantErr)
			require.True(t, res.Destroyed)
			require.Equal(t, 1, f.removed, "container removed")
			require.Contains(t, f.execs, []string{"kill", "-TERM", "-1"}, "tools got SIGTERM first")
			if tt.check != nil {
				tt.check(t, res, &out)
			}
		})
	}
}

func TestRunDoesNotHangOnInheritedStdout(t *testing.T) {
	f := newFake(t, script{holdOpen: true, run: func(p proc) int {
		io.WriteString(p.stdout, `{"ok":true}`)
		return 0
	}})
	var out bytes.Buffer
	res, err := fastRunner(f).Run(t.Context(), "c1", Command{User: tool, Argv: []string{"/bin/tool"}, Stdout: &out})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	require.Equal(t, `{"ok":true}`, out.String())
	require.Zero(t, f.removed)
}

func TestRunContainerGone(t *testing.T) {
	for _, e := range []error{errdefs.NotFound(errors.New("no such container")), errdefs.Conflict(errors.New("container is not running"))} {
		f := newFake(t, script{})
		f.createErr = e
		_, err := fastRunner(f).Run(t.Context(), "c1", Command{User: tool, Argv: []string{"x"}})
		require.ErrorIs(t, err, ErrContainerGone)
	}
	f := newFake(t, script{})
	f.createErr = errors.New("daemon on fire")
	_, err := fastRunner(f).Run(t.Context(), "c1", Command{User: tool, Argv: []string{"x"}})
	require.NotErrorIs(t, err, ErrContainerGone)
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("source broke") }

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errors.New("sink broke") }

const tool = "65532:65532"

func TestRunRefusesACommandWithoutUser(t *testing.T) {
	for _, cmd := range []Command{
		{Argv: []string{"/bin/tool"}},
		{Argv: []string{"kill", "-STOP", "1"}, WorkDir: "/workspace"},
		{Argv: []string{"sh"}, Stdin: strings.NewReader("x"), Timeout: time.Second},
	} {
		f := newFake(t, script{run: func(proc) int { t.Error("a command without a user ran"); return 0 }})
		res, err := fastRunner(f).Run(t.Context(), "c1", cmd)
		require.ErrorIs(t, err, ErrNoUser)
		require.Equal(t, -1, res.ExitCode)
		require.Empty(t, f.execs, "nothing reaches the daemon")
	}
}
