package testenv

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Versions of the test servers scripts/test-servers.sh builds; they name
// the cache directory the binaries are found in. Change both places.
const (
	MinIOVersion    = "v0.0.0-20260212201848-7aac2a2c5b7c"
	RegistryVersion = "v3.1.2"
	PromtoolVersion = "v0.316.0"
	// TemporalServerVersion is the full Temporal server (and its SQL
	// schema tool) the production-shaped tests run.
	TemporalServerVersion = "v1.29.1"
)

// ServerReadyTimeout bounds a test server's start; generous, a loaded
// 2-core machine starts MinIO in seconds but not always in one.
const ServerReadyTimeout = 90 * time.Second

// serverBinary finds a test server's binary: the path in env, else the
// cache path scripts/test-servers.sh builds to. Missing → Need (skip, or
// fail under AGENTFLOW_REQUIRE_DOCKER=1).
func serverBinary(t testing.TB, env, name, version string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		_, err := os.Stat(p)
		Need(t, err == nil, "%s=%s: %v", env, p, err)
		return p
	}
	cache := os.Getenv("AGENTFLOW_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "agentflow")
	}
	p := filepath.Join(cache, name+"-"+version, name)
	_, err := os.Stat(p)
	Need(t, err == nil, "%s not at %s (run scripts/test-servers.sh %s, or set %s)", name, p, name, env)
	return p
}

// Promtool is the path of Prometheus' promtool (AGENTFLOW_PROMTOOL or the
// scripts/test-servers.sh cache; missing → skip, or fail under
// AGENTFLOW_REQUIRE_DOCKER=1).
func Promtool(t testing.TB) string {
	t.Helper()
	return serverBinary(t, "AGENTFLOW_PROMTOOL", "promtool", PromtoolVersion)
}

// process is one run of a test server binary, logging to a file.
type process struct {
	name     string
	bin      string
	args     []string
	env      []string
	logPath  string
	readyURL string
	// readyStatus is the status readyURL answers when the server is
	// ready (0 = 200).
	readyStatus int
	// ready, when set, replaces readyURL: the server is ready when it
	// returns true.
	ready func() bool
	// sysProcAttr replaces the default (own process group, killed with
	// the test binary), e.g. to run as another user.
	sysProcAttr *syscall.SysProcAttr
	dir         string // working directory ("" = the test's)

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// start runs the binary and waits until readyURL answers readyStatus
// (200 by default).
func (p *process) start(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		t.Fatalf("%s: already running", p.name)
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatalf("%s log: %v", p.name, err)
	}
	defer logf.Close()
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, and killed with the test binary, so a
	// crashed test leaves no server behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if p.sysProcAttr != nil {
		cmd.SysProcAttr = p.sysProcAttr
	}
	cmd.Dir = p.dir
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.done = cmd, done

	ctx, cancel := context.WithTimeout(context.Background(), ServerReadyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.ready != nil {
			if p.ready() {
				return
			}
		} else {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.readyURL, nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				if want := cmp.Or(p.readyStatus, http.StatusOK); resp.StatusCode == want {
					return
				}
			}
		}
		select {
		case <-done:
			p.cmd = nil
			t.Fatalf("%s exited before it was ready:\n%s", p.name, p.logTail())
		case <-ctx.Done():
			p.stopLocked()
			t.Fatalf("%s not ready at %s after %s:\n%s", p.name, p.readyURL, ServerReadyTimeout, p.logTail())
		case <-tick.C:
		}
	}
}

// stop ends the server: SIGTERM, then SIGKILL after 10 s. Idempotent.
func (p *process) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked()
}

func (p *process) stopLocked() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	p.cmd = nil
}

func (p *process) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(bytes.TrimSpace(b))
}

// envMap turns K=V pairs into a getenv function.
func envMap(kv []string) func(string) string {
	m := map[string]string{}
	for _, e := range kv {
		k, v, _ := strings.Cut(e, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

func hostPort(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
