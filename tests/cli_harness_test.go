//go:build e2e

package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dockerclient "github.com/docker/docker/client"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/cli"
	"github.com/agentflow/agentflow/internal/cli/engine"
	"github.com/agentflow/agentflow/internal/testenv"
	"github.com/agentflow/agentflow/worker"
)

// The CLI suite drives agentctl verbs through cli.Run against a real
// Temporal dev server (on a free port, see startStack) and an in-process
// worker.
//
// Sandbox host: the real Docker host and the images of
// tools/build-images.sh when both are available; otherwise an in-process
// fake host that emulates testtool's ok/exit/sleep modes, so the CLI and
// Temporal side still run end to end. AGENTFLOW_REQUIRE_DOCKER=1 forbids
// the fallback.

type cliEnv struct {
	address string
	client  client.Client
	logDir  string
	dir     string
	images  map[string]string // tool name → image ID
	real    bool              // real Docker host
	docker  *dockerclient.Client
	label   string
}

// agentctl runs one CLI invocation and returns exit code, stdout, stderr.
func (e *cliEnv) agentctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	full := append([]string{"--address", e.address}, args...)
	code := cli.Run(ctx, "test", full, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb}, engine.Commands())
	t.Logf("agentctl %s → %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// mustJSON runs agentctl expecting exit 0 and decodes stdout.
func (e *cliEnv) mustJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	code, out, errOut := e.agentctl(t, args...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.NoError(t, json.Unmarshal([]byte(out), v), "stdout: %s", out)
}

func (e *cliEnv) writeSpec(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(e.dir, name+".yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

// realHostProblem says why the real Docker host cannot be used ("" = it can).
func realHostProblem(t *testing.T, root string) (string, map[string]string, *dockerclient.Client) {
	dc, err := testenv.DockerClient(t.Context())
	if err != nil {
		return err.Error(), nil, nil
	}
	b, err := os.ReadFile(filepath.Join(root, ".data", "images.json"))
	if err != nil {
		dc.Close()
		return fmt.Sprintf("no .data/images.json (run tools/build-images.sh): %v", err), nil, nil
	}
	var entries []struct{ Name, ID string }
	if err := json.Unmarshal(b, &entries); err != nil {
		dc.Close()
		return fmt.Sprintf(".data/images.json: %v", err), nil, nil
	}
	images := map[string]string{}
	for _, en := range entries {
		images[en.Name] = en.ID
	}
	if images["testtool"] == "" {
		dc.Close()
		return "testtool missing from .data/images.json", nil, nil
	}
	return "", images, dc
}

// startCLIEnv starts a dev server and a worker; each with, if any, may
// change the worker's configuration (webhooks, stores) before it starts.
func startCLIEnv(t *testing.T, with ...func(*worker.Config)) *cliEnv {
	t.Helper()
	root := testenv.RepoRoot(t)
	bin := testenv.TemporalBinary(t)

	tmp := t.TempDir()
	e := &cliEnv{dir: tmp, logDir: filepath.Join(tmp, "logs"), label: fmt.Sprintf("cli-%d-%d", os.Getpid(), time.Now().UnixNano())}

	var backend *worker.Backend
	problem, images, dc := realHostProblem(t, root)
	if problem == "" && os.Getenv("AGENTFLOW_E2E_FAKE_HOST") != "1" {
		e.real, e.images, e.docker = true, images, dc
		t.Cleanup(func() { dc.Close() })
	} else {
		if testenv.Required() {
			t.Fatalf("%s=1 but %s", testenv.RequireEnv, problem)
		}
		t.Logf("CLI e2e: using the in-process fake sandbox host (%s)", problem)
		fake := newFakeHost()
		e.images = fake.images
		backend = &worker.Backend{Host: fake, Ping: func(context.Context) error { return nil }, Reap: func(context.Context) (int, error) { return 0, nil }}
	}

	cfg := worker.Config{
		HealthAddr:    "-",
		MetricsAddr:   "-",
		CheckpointDir: filepath.Join(tmp, "checkpoints"),
		LogDir:        e.logDir,
		StopTimeout:   10 * time.Second,
		Backend:       backend,
		SandboxLabels: map[string]string{"agentflow.test": "1", "agentflow.e2e": e.label},
	}
	for _, f := range with {
		f(&cfg)
	}
	st := startStack(t, bin, tmp, cfg, nil)
	e.address, e.client = st.address, st.client
	return e
}

// fakeHost is an in-memory ExecutionHost whose "images" behave like
// testtool (modes ok, exit, sleep) and answer --version/--help. It lets the
// CLI suite run where Docker or the images are missing; it checks the parts
// of the contract the engine relies on (unknown execution, idempotent
// Terminate, abort on cancellation).
type fakeHost struct {
	mu       sync.Mutex
	images   map[string]string // tool name → image ID
	versions map[string]string // image ID → version
	live     map[exechost.ExecutionID]string
	n        int
}

func newFakeHost() *fakeHost {
	h := &fakeHost{images: map[string]string{}, versions: map[string]string{}, live: map[exechost.ExecutionID]string{}}
	for name, v := range map[string]string{"testtool": "1.0", "echo": "1.0"} {
		id := "sha256:" + strings.Repeat(fmt.Sprintf("%x", len(name)), 64)[:64]
		h.images[name], h.versions[id] = id, v
	}
	return h
}

func (h *fakeHost) Provision(_ context.Context, req exechost.ProvisionRequest) (*exechost.Execution, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.versions[req.Image]; !ok {
		return nil, &exechost.PolicyError{Field: "image", Reason: "no such image " + req.Image}
	}
	h.live[req.ExecutionID] = req.Image
	return &exechost.Execution{ExecutionID: req.ExecutionID, ImageDigest: req.Image, Deadline: time.Now().Add(req.Resources.Runtime)}, nil
}

func (h *fakeHost) Exec(ctx context.Context, id exechost.ExecutionID, req exechost.ExecRequest) (*exechost.ExecResult, error) {
	h.mu.Lock()
	img, ok := h.live[id]
	h.mu.Unlock()
	if !ok {
		return nil, exechost.ErrTerminated
	}
	if len(req.Command) == 2 && req.Command[1] == "--version" {
		return &exechost.ExecResult{Stdout: []byte(h.versions[img] + "\n")}, nil
	}
	if len(req.Command) == 2 && req.Command[1] == "--help" {
		return &exechost.ExecResult{Stdout: []byte("usage: fake testtool\n")}, nil
	}
	var in struct {
		Mode    string  `json:"mode"`
		Code    int     `json:"code"`
		Stderr  string  `json:"stderr"`
		Seconds float64 `json:"seconds"`
	}
	if err := json.Unmarshal(req.Stdin, &in); err != nil {
		return &exechost.ExecResult{ExitCode: 2, Stderr: []byte("bad input: " + err.Error())}, nil
	}
	switch in.Mode {
	case "exit":
		return &exechost.ExecResult{ExitCode: in.Code, Stderr: []byte(in.Stderr)}, nil
	case "sleep":
		select {
		case <-ctx.Done():
			_ = h.Terminate(context.Background(), id)
			return &exechost.ExecResult{Aborted: true}, fmt.Errorf("exec: %w", exechost.ErrAborted)
		case <-time.After(time.Duration(in.Seconds * float64(time.Second))):
		}
		return &exechost.ExecResult{Stdout: []byte(`{"slept": true}`)}, nil
	default:
		return &exechost.ExecResult{Stdout: req.Stdin, Stderr: []byte("fake testtool: ok\n")}, nil
	}
}

func (h *fakeHost) Checkpoint(_ context.Context, id exechost.ExecutionID, _ exechost.CheckpointRequest) (*exechost.Checkpoint, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.live[id]; !ok {
		return nil, exechost.ErrTerminated
	}
	h.n++
	return &exechost.Checkpoint{CheckpointID: exechost.CheckpointID(fmt.Sprintf("ckpt-%d", h.n)), ExecutionID: id, CreatedAt: time.Now()}, nil
}

func (h *fakeHost) Restore(ctx context.Context, req exechost.RestoreRequest) (*exechost.Execution, error) {
	return nil, errors.New("fake host: restore not supported")
}

func (h *fakeHost) Terminate(_ context.Context, id exechost.ExecutionID) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.live, id)
	return nil
}

var jsonUnmarshal = json.Unmarshal
