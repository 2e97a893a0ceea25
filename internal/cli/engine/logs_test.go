package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/logstore"
	"github.com/agentflow/agentflow/internal/objstore"
)

// downable is a Mem that can be taken down while writers use it.
type downable struct {
	*objstore.Mem
	down atomic.Bool
}

func (d *downable) Put(ctx context.Context, key string, r io.Reader, o objstore.PutOptions) (objstore.Info, error) {
	if d.down.Load() {
		return objstore.Info{}, &objstore.UnavailableError{Store: "mem", Op: "put", Key: key, Reason: "down"}
	}
	return d.Mem.Put(ctx, key, r, o)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func logsOpts(out io.Writer, store *logstore.Store) *logsOptions {
	return &logsOptions{
		Options: &Options{Output: "table", Streams: Streams{Out: out, Err: io.Discard}},
		ID:      "ag", Step: "s", Interval: time.Millisecond,
		open: func(context.Context, *logsOptions) (*logstore.Store, func(), error) { return store, func() {}, nil },
	}
}

func key(attempt int32) logstore.Key {
	return logstore.Key{AgentID: "ag", RunID: "run-1", StepID: "s", Attempt: attempt}
}

// TestFollowLogsRunningAttemptsUntilTheRunCloses: -f shows a running
// attempt's lines before it ends, leaves an attempt whose worker died once
// the next attempt starts, and ends when the run has closed.
func TestFollowLogsRunningAttemptsUntilTheRunCloses(t *testing.T) {
	ctx := t.Context()
	mem := &downable{Mem: objstore.NewMem()}
	store := logstore.New(mem, logstore.Options{FlushInterval: time.Hour})
	var closed atomic.Bool
	state := func(context.Context, string) (runState, error) {
		return runState{RunID: "run-1", Closed: closed.Load()}, nil
	}
	var out lockedBuffer
	o := logsOpts(&out, store)

	w1, err := store.Open(ctx, key(1))
	require.NoError(t, err)
	_, _ = io.WriteString(w1, "attempt one is running\n")
	require.NoError(t, w1.Flush(ctx))

	done := make(chan error, 1)
	go func() { done <- followLogs(ctx, o, store, state) }()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "attempt one is running\n") },
		time.Minute, time.Millisecond)

	// Attempt 1's worker dies: its log never gets an end marker.
	mem.down.Store(true)
	require.Error(t, w1.Close(ctx, logstore.Trailer{}))
	mem.down.Store(false)
	select {
	case err := <-done:
		t.Fatalf("follow ended while the run is open: %v", err)
	default:
	}

	// Attempt 2 starts elsewhere: -f moves on to it.
	w2, err := store.Open(ctx, key(2))
	require.NoError(t, err)
	_, _ = io.WriteString(w2, "attempt two is running\n")
	require.NoError(t, w2.Flush(ctx))
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "attempt two is running\n") },
		time.Minute, time.Millisecond)
	require.NoError(t, w2.Close(ctx, logstore.Trailer{Text: []byte("done\n"), Outcome: "success"}))
	closed.Store(true)
	require.NoError(t, <-done)

	require.Equal(t, "==> s attempt 1 (run run-1) <==\n"+
		"attempt one is running\n"+
		"[agentflow: attempt 1's log has no end: its worker stopped before ending it]\n"+
		"==> s attempt 2 (run run-1) <==\n"+
		"attempt two is running\ndone\n", out.String())
}

func TestFollowLogsJSONAndTail(t *testing.T) {
	ctx := t.Context()
	store := logstore.New(objstore.NewMem(), logstore.Options{FlushInterval: time.Hour})
	w, err := store.Open(ctx, key(1))
	require.NoError(t, err)
	_, _ = io.WriteString(w, "a\nb\nc\n")
	require.NoError(t, w.Close(ctx, logstore.Trailer{Outcome: "success"}))

	var out bytes.Buffer
	o := logsOpts(&out, store)
	o.Output, o.Tail = "json", 2
	state := func(context.Context, string) (runState, error) { return runState{RunID: "run-1", Closed: true}, nil }
	require.NoError(t, followLogs(ctx, o, store, state))
	var docs []logDoc
	require.NoError(t, json.Unmarshal(out.Bytes(), &docs))
	require.Equal(t, []logDoc{{RunID: "run-1", Step: "s", Attempt: 1, Log: "b\nc\n", Finished: true}}, docs)
}

func TestLogsWithoutFollow(t *testing.T) {
	ctx := t.Context()
	store := logstore.New(objstore.NewMem(), logstore.Options{FlushInterval: time.Hour})
	for _, a := range []int32{1, 2} {
		w, err := store.Open(ctx, key(a))
		require.NoError(t, err)
		_, _ = io.WriteString(w, "line of "+string(rune('0'+a)))
		if a == 1 {
			require.NoError(t, w.Close(ctx, logstore.Trailer{Text: []byte("\n--- agentflow: attempt 1 failed: boom\n")}))
			continue
		}
		require.NoError(t, w.Flush(ctx)) // attempt 2 still running
		defer func() { require.NoError(t, w.Close(ctx, logstore.Trailer{})) }()
	}
	tests := []struct {
		name    string
		output  string
		attempt int32
		tail    int
		want    string
	}{
		{name: "every attempt with headers", want: "==> s attempt 1 (run run-1) <==\nline of 1\n--- agentflow: attempt 1 failed: boom\n" +
			"==> s attempt 2 (run run-1) <==\nline of 2\n"},
		{name: "one attempt, tail", attempt: 1, tail: 1, want: "--- agentflow: attempt 1 failed: boom\n"},
		{name: "json", output: "json", attempt: 2, want: `[{"run_id":"run-1","step":"s","attempt":2,"log":"line of 2","finished":false}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			o := logsOpts(&out, store)
			o.Attempt, o.Tail = tc.attempt, tc.tail
			if tc.output != "" {
				o.Output = tc.output
			}
			require.NoError(t, runLogs(ctx, o))
			if tc.output == "json" {
				require.JSONEq(t, tc.want, out.String())
				return
			}
			require.Equal(t, tc.want, out.String())
		})
	}

	var out bytes.Buffer
	o := logsOpts(&out, store)
	o.Step = "nope"
	err := runLogs(ctx, o)
	var ee *ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, ExitFailure, ee.Code)
	require.Contains(t, err.Error(), "no logs for step nope of agent ag in mem")
}

// TestLogsStoreFlags: --store names the workers' shared store (its logs/
// prefix), --log-dir a local directory, never both; an explicit --log-dir
// wins over AGENTFLOW_STORE.
func TestLogsStoreFlags(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	rootStore, err := objstore.NewDir(root)
	require.NoError(t, err)
	defer rootStore.Close()
	w, err := logstore.OnRoot(rootStore, logstore.Options{}).Open(ctx, key(1))
	require.NoError(t, err)
	_, _ = io.WriteString(w, "from the shared store\n")
	require.NoError(t, w.Close(ctx, logstore.Trailer{}))

	dir := t.TempDir()
	local, closeLocal, err := logstore.NewDir(dir, logstore.Options{})
	require.NoError(t, err)
	defer func() { _ = closeLocal() }()
	w, err = local.Open(ctx, key(1))
	require.NoError(t, err)
	_, _ = io.WriteString(w, "from the local directory\n")
	require.NoError(t, w.Close(ctx, logstore.Trailer{}))

	tests := []struct {
		name     string
		env      string
		args     []string
		wantCode int
		want     string
	}{
		{name: "store flag", args: []string{"--store", "file://" + root}, want: "from the shared store\n"},
		{name: "store from env", env: "file://" + root, want: "from the shared store\n"},
		{name: "log dir flag wins over env", env: "file://" + root, args: []string{"--log-dir", dir}, want: "from the local directory\n"},
		{name: "both flags", args: []string{"--store", "file://" + root, "--log-dir", dir}, wantCode: ExitInvalid, want: "give one"},
		{name: "missing log dir", args: []string{"--log-dir", dir + "/nope"}, wantCode: ExitFailure, want: "no log directory"},
		{name: "bad store", args: []string{"--store", "ftp://x"}, wantCode: ExitFailure, want: "unsupported scheme"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AGENTFLOW_STORE", tc.env)
			var out, errb bytes.Buffer
			args := append([]string{"logs", "ag", "--step", "s"}, tc.args...)
			code := Run(ctx, "test", args, Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
			require.Equal(t, tc.wantCode, code, "stderr: %s", errb.String())
			if tc.wantCode == 0 {
				require.Equal(t, tc.want, out.String())
				return
			}
			require.Contains(t, errb.String(), tc.want)
		})
	}
}
