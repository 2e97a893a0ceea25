package hosttest

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
)

// liveStderr: ExecRequest.Stderr gets the command's stderr while it runs,
// has all of it when Exec returns, and can neither stall nor fail the exec.
func (s *suite) liveStderr(t *testing.T) {
	t.Run("ReachesTheWriterWhileTheCommandRuns", func(t *testing.T) {
		x := s.provision(t, nil)
		w := &watchWriter{want: "before\n", seen: make(chan struct{})}
		done := s.execAsync(t.Context(), x.ExecutionID, exechost.ExecRequest{
			Command: Cmd.StderrGated("before\n", "gate", "after\n"), Stderr: w, Timeout: 2 * time.Minute,
		})
		// The command cannot end before the gate exists, and only this
		// test creates it: the line reached the writer while it ran.
		select {
		case <-w.seen:
		case o := <-done:
			t.Fatalf("Exec returned (%v) before its stderr reached ExecRequest.Stderr", o.err)
		case <-time.After(time.Minute):
			t.Fatal("stderr of a running command never reached ExecRequest.Stderr")
		}
		_, code, err := s.h.Probe(t.Context(), x.ExecutionID, Cmd.Write("gate", ""))
		require.NoError(t, err)
		require.Zero(t, code)
		o := s.await(t, done, "Exec did not return after its gate opened")
		require.NoError(t, o.err)
		require.Zero(t, o.res.ExitCode)
		require.Equal(t, "before\nafter\n", string(o.res.Stderr))
		require.Equal(t, "before\nafter\n", w.String(), "all stderr is delivered when Exec returns")
	})
	t.Run("FailingWriterNeverFailsTheExec", func(t *testing.T) {
		x := s.provision(t, nil)
		w := &failWriter{}
		res := s.exec(t, x.ExecutionID, exechost.ExecRequest{Command: Cmd.Exit(3, "tool stderr\n"), Stderr: w})
		require.Equal(t, 3, res.ExitCode)
		require.Equal(t, "tool stderr\n", string(res.Stderr))
		require.LessOrEqual(t, w.calls(), 1, "a writer that failed is not called again")
		s.run(t, x.ExecutionID, Cmd.Write("still-usable", "yes"))
	})
	t.Run("StuckWriterNeverStallsTheExec", func(t *testing.T) {
		x := s.provision(t, nil)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) }) // ends the host's delivering goroutine
		w := &stuckWriter{release: release}
		done := s.execAsync(t.Context(), x.ExecutionID, exechost.ExecRequest{
			Command: Cmd.Exit(0, strings.Repeat("x", 4096)), Stderr: w, Timeout: time.Minute,
		})
		o := s.await(t, done, "Exec waited for a stuck ExecRequest.Stderr")
		require.NoError(t, o.err)
		require.Zero(t, o.res.ExitCode)
		require.Len(t, o.res.Stderr, 4096)
	})
}

// watchWriter records what it gets and closes seen once it holds want.
type watchWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

type failWriter struct {
	mu sync.Mutex
	n  int
}

func (w *failWriter) Write([]byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	return 0, errors.New("log store down")
}

func (w *failWriter) calls() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

type stuckWriter struct{ release chan struct{} }

func (w *stuckWriter) Write(p []byte) (int, error) {
	<-w.release
	return len(p), nil
}
