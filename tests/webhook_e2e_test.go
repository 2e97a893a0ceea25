//go:build e2e

package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/webhook"
	"github.com/agentflow/agentflow/worker"
	"github.com/agentflow/agentflow/workflows"
)

// hookReceiver is a webhook receiver as a user would write one: it
// verifies every delivery with package webhook and records what it got.
type hookReceiver struct {
	secret []byte
	mu     sync.Mutex
	got    []receivedHook
}

type receivedHook struct {
	path   string
	event  activities.WebhookEvent
	key    string
	verify error
}

func (r *hookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h := receivedHook{path: req.URL.Path, key: req.Header.Get(webhook.HeaderIdempotencyKey),
		verify: webhook.Verify(r.secret, req.Header, body, time.Now(), 0)}
	_ = json.Unmarshal(body, &h.event)
	r.mu.Lock()
	r.got = append(r.got, h)
	r.mu.Unlock()
	if h.verify != nil {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// forAgent returns the deliveries of one agent, by target path.
func (r *hookReceiver) forAgent(id string) map[string][]receivedHook {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]receivedHook{}
	for _, h := range r.got {
		if h.event.AgentID == id {
			out[h.path] = append(out[h.path], h)
		}
	}
	return out
}

const hookSpec = `name: hook-%s
version: "1.0.0"
notify:
  webhooks: ["%s/spec"]
steps:
  - id: only
    tool: testtool:1.0
    retries: 0
    inputs: %s
`

// TestWebhookOneSignedEventPerTerminalState: a worker with --webhook-url
// and --webhook-secret-file, and specs with notify:, send exactly one
// signed event per run to each target, for a succeeded, a failed and a
// canceled run; the receiver verifies every signature with package
// webhook.
func TestWebhookOneSignedEventPerTerminalState(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "webhook.secret")
	require.NoError(t, os.WriteFile(secretFile, []byte("e2e-webhook-secret-0123456789abcdef\n"), 0o600))
	secret, err := webhook.LoadSecret(secretFile) // what worker --webhook-secret-file does
	require.NoError(t, err)

	rec := &hookReceiver{secret: secret}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)

	e := startCLIEnv(t, func(c *worker.Config) {
		c.WebhookURLs = []string{srv.URL + "/worker"}
		c.WebhookSecret = secret
	})
	e.registerTools(t, "testtool")
	stamp := time.Now().Format("150405")

	cases := []struct {
		name   string
		inputs string
		want   string
		code   int
		cancel bool
	}{
		{name: "succeeded", inputs: `{mode: ok}`, want: workflows.RunSucceeded, code: 0},
		{name: "failed", inputs: `{mode: exit, code: 3}`, want: workflows.RunFailed, code: 1},
		{name: "canceled", inputs: `{mode: sleep, seconds: 300}`, want: workflows.RunCanceled, cancel: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("hook-%s-%s", tc.name, stamp)
			sp := e.writeSpec(t, "hook-"+tc.name, fmt.Sprintf(hookSpec, tc.name, srv.URL, tc.inputs))
			if !tc.cancel {
				code, _, _ := e.agentctl(t, "run", "-f", sp, "--name", id, "--wait")
				require.Equal(t, tc.code, code)
			} else {
				code, _, _ := e.agentctl(t, "run", "-f", sp, "--name", id)
				require.Equal(t, 0, code)
				require.Eventually(t, func() bool {
					v, err := e.client.QueryWorkflow(t.Context(), id, "", workflows.StatusQuery)
					var st workflows.Status
					return err == nil && v.Get(&st) == nil && st.CurrentStep == "only"
				}, time.Minute, 200*time.Millisecond)
				code, _, _ = e.agentctl(t, "cancel", id, "--wait")
				require.Equal(t, 0, code)
			}
			// The run is closed: its RunFinished (run on a disconnected
			// context, awaited before the workflow returns) has delivered.
			got := rec.forAgent(id)
			require.Len(t, got, 2, "targets: %v", got)
			for _, path := range []string{"/worker", "/spec"} {
				require.Len(t, got[path], 1, "exactly one event at %s", path)
				h := got[path][0]
				require.NoError(t, h.verify, "signature at %s", path)
				require.Equal(t, "run.finished", h.event.Event)
				require.Equal(t, tc.want, h.event.Status)
				require.NotEmpty(t, h.event.RunID)
				require.Equal(t, h.event.RunID, h.key, "Idempotency-Key is the run ID")
				require.Empty(t, h.event.Webhooks, "receivers do not learn other targets")
			}
		})
	}
}

// registerTools registers each named tool at version 1.0 with the image the
// environment has for it.
func (e *cliEnv) registerTools(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		require.NotEmpty(t, e.images[name], "no image for %s", name)
		code, _, errOut := e.agentctl(t, "tool", "register", "--name", name, "--version", "1.0", "--image", e.images[name])
		require.Equal(t, 0, code, errOut)
	}
}
