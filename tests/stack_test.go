//go:build e2e

package tests

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/agentflow/agentflow/internal/devserver"
	"github.com/agentflow/agentflow/worker"
)

// stack is a Temporal dev server on a free loopback port plus an in-process
// worker, both torn down with t.Cleanup (worker first). Every e2e harness
// builds on it.
type stack struct {
	address string
	client  client.Client
	ready   worker.Ready
}

// startStack starts the dev server (bin/temporal, state under tmp) and a
// worker configured by cfg; Address, Logger and OnReady are filled in.
// afterStop runs once the worker has stopped (e.g. a container leak check).
// The server is headless unless a devOpts function changes its options
// (e.g. a Web UI on a free port).
func startStack(t *testing.T, bin, tmp string, cfg worker.Config, afterStop func(), devOpts ...func(*devserver.Options)) *stack {
	t.Helper()
	srvLog, err := os.Create(filepath.Join(tmp, "temporal.log"))
	require.NoError(t, err)
	dopts := devserver.Options{
		Bin: bin, Port: engineFreePort(t), Headless: true,
		DBFile: filepath.Join(tmp, "temporal.db"), Stdout: srvLog, Stderr: srvLog,
	}
	for _, f := range devOpts {
		f(&dopts)
	}
	srv, err := devserver.Start(t.Context(), dopts)
	require.NoError(t, err, "start dev server")
	t.Cleanup(func() { _ = srv.Stop(15 * time.Second) })

	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Address = srv.Address
	cfg.Logger = logger
	ready := make(chan worker.Ready, 1)
	cfg.OnReady = func(r worker.Ready) { ready <- r }
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(wctx, cfg) }()

	s := &stack{address: srv.Address}
	select {
	case s.ready = <-ready:
	case err := <-done:
		stop()
		t.Fatalf("worker exited during start: %v", err)
	case <-time.After(2 * time.Minute):
		stop()
		t.Fatal("worker did not become ready")
	}
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done)
		if afterStop != nil {
			afterStop()
		}
	})

	c, err := client.Dial(client.Options{HostPort: srv.Address, Logger: tlog.NewStructuredLogger(logger)})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	s.client = c
	return s
}

// testWriter sends worker logs to the test log; it stops writing once the
// test is over (the worker may log during shutdown).
type testWriter struct{ t *testing.T }

var testWriterMu sync.Mutex

func (w testWriter) Write(p []byte) (int, error) {
	testWriterMu.Lock()
	defer testWriterMu.Unlock()
	defer func() { _ = recover() }() // t.Log after the test ended panics
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
