package activities

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/logstore"
)

// TestRunStepStreamsScrubbedStderrLive: stderr the tool writes while it
// runs is in the log store before the tool ends, scrubbed even where a
// secret is split across writes, and the log ends with the failure line.
func TestRunStepStreamsScrubbedStderrLive(t *testing.T) {
	const secret = "tok-S3CR3T-value"
	h := newHarness(t)
	req := baseReq()
	req.SecretSources = map[string]string{"api_token": "env://AF_TEST_TOKEN"}
	key := logstore.Key{AgentID: req.AgentID, RunID: req.RunID, StepID: req.StepID, Attempt: 1}
	h.host.exec = func(ctx context.Context, x exechost.ExecRequest) (*exechost.ExecResult, error) {
		require.NotNil(t, x.Stderr, "RunStep asks the host for live stderr")
		parts := []string{"first line\n", "token tok-S3C", "R3T-value and " + base64.StdEncoding.EncodeToString([]byte(secret))[:9],
			base64.StdEncoding.EncodeToString([]byte(secret))[9:] + "\n"}
		_, _ = io.WriteString(x.Stderr, parts[0])
		// The tool is still running: its first line is already stored.
		require.Eventually(t, func() bool {
			b, err := h.logs.Read(ctx, key, 0)
			return err == nil && string(b) == "first line\n"
		}, time.Minute, 5*time.Millisecond)
		for _, p := range parts[1:] {
			_, _ = io.WriteString(x.Stderr, p)
		}
		return &exechost.ExecResult{ExitCode: 2, Stdout: []byte(`{"x":"` + secret + `"}`), Stderr: []byte(strings.Join(parts, ""))}, nil
	}
	_, err := h.run(t, req)
	require.Error(t, err)

	log := h.log(t, req)
	want := "first line\ntoken *** and ***\n--- stdout ---\n{\"x\":\"***\"}\n--- agentflow: attempt 1 failed: tool exited with code 2"
	require.True(t, strings.HasPrefix(log, want), "log:\n%s", log)
	entries, err := h.logs.List(t.Context(), req.AgentID)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.True(t, entries[0].Finished)

	// No object in the store holds the secret or an encoded form of it.
	infos, err := h.mem.List(t.Context(), "")
	require.NoError(t, err)
	for _, info := range infos {
		rc, err := h.mem.Get(t.Context(), info.Key)
		require.NoError(t, err)
		b, err := io.ReadAll(rc)
		require.NoError(t, err)
		require.NoError(t, rc.Close())
		for _, f := range secretForms([]string{secret}) {
			require.NotContains(t, string(b), f, info.Key)
		}
	}
}

// TestRunStepLogStoreOutageIsLoggedNotFailed: logs are best effort.
func TestRunStepLogStoreOutageIsLoggedNotFailed(t *testing.T) {
	h := newHarness(t)
	var logged syncLog
	h.mem.Fail = errors.New("connection refused") // set before any writer runs
	h.logs = logstore.New(h.mem, logstore.Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	h.opts.Logs = h.logs
	h.opts.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	h.host.exec = func(_ context.Context, x exechost.ExecRequest) (*exechost.ExecResult, error) {
		_, _ = io.WriteString(x.Stderr, "working\n")
		return &exechost.ExecResult{Stdout: []byte(`{"ok":true}`), Stderr: []byte("working\n")}, nil
	}
	res, err := h.run(t, baseReq())
	require.NoError(t, err)
	require.Equal(t, map[string]any{"ok": true}, res.Output)
	require.Contains(t, logged.String(), "step log")
	require.Contains(t, logged.String(), "connection refused")
}

type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSelfAdoptionKeepsTheLog: a redelivered attempt that adopts its own
// first delivery's result leaves that delivery's log (the tool's stderr)
// alone instead of replacing it with one line.
func TestSelfAdoptionKeepsTheLog(t *testing.T) {
	h := newHarness(t)
	req := baseReq()
	req.Attempt = 2
	key := logstore.Key{AgentID: req.AgentID, RunID: req.RunID, StepID: req.StepID, Attempt: 2}
	w, err := h.logs.Open(t.Context(), key)
	require.NoError(t, err)
	_, _ = io.WriteString(w, "the tool ran in the first delivery\n")
	require.NoError(t, w.Close(t.Context(), logstore.Trailer{Outcome: "success"}))

	opts := h.opts
	opts.Host = h.host
	a := New(opts)
	for _, from := range []int32{2, 1} {
		at := &attempt{a: a, req: req, number: 2, adoptedFrom: from, scrub: newScrubber(nil), log: a.log}
		at.writeLog(t.Context(), "", "success")
		b, err := h.logs.Read(t.Context(), key, 0)
		require.NoError(t, err)
		if from == 2 {
			require.Equal(t, "the tool ran in the first delivery\n", string(b))
			continue
		}
		// Adopting an earlier attempt: this attempt's own log says so.
		require.Equal(t, "--- agentflow: attempt 2 adopted the recorded result of attempt 1; the tool did not run again\n", string(b))
	}
}
