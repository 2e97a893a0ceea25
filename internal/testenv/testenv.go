// Package testenv holds the gates every integration and end-to-end test
// shares: a live Docker daemon, the Temporal CLI binary, a leftover check
// for TestMain and a free TCP port. A missing prerequisite skips the test,
// or fails it when AGENTFLOW_REQUIRE_DOCKER=1 (CI sets it), so a CI machine
// that lost its daemon cannot pass by skipping everything.
//
// Only tests import this package; nothing in a binary does.
package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"
)

// RequireEnv is the variable that turns skips into failures.
const RequireEnv = "AGENTFLOW_REQUIRE_DOCKER"

// PingTimeout bounds the daemon ping; generous, the machine may be loaded.
const PingTimeout = 20 * time.Second

// Required reports whether a missing prerequisite must fail the test.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Need skips t unless ok; under AGENTFLOW_REQUIRE_DOCKER=1 it fails instead.
// The message says what is missing.
func Need(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s=1 but %s", RequireEnv, msg)
	}
	t.Skipf("skipping: %s (set %s=1 to fail instead)", msg, RequireEnv)
}

// DockerClient connects to the daemon of the environment (DOCKER_HOST
// honoured) and pings it within PingTimeout. The caller closes the client.
func DockerClient(ctx context.Context) (*client.Client, error) {
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	if _, err := c.Ping(pctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("no Docker daemon answers: %w", err)
	}
	return c, nil
}

// Docker returns a client to a live daemon, closed when t ends; without
// one it skips t (fails under AGENTFLOW_REQUIRE_DOCKER=1).
func Docker(t testing.TB) *client.Client {
	t.Helper()
	c, err := DockerClient(context.Background())
	Need(t, err == nil, "%v", err)
	t.Cleanup(func() { c.Close() })
	return c
}

// RepoRoot is the directory holding go.mod, found upwards from the test's
// working directory (its package directory).
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("getwd: %v", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod above %s", dir)
		}
	}
}

// TemporalBinary returns the Temporal CLI dev server binary: the one
// `make temporal` puts in the repository's bin/, else `temporal` on PATH.
// Without either it skips t (fails under AGENTFLOW_REQUIRE_DOCKER=1).
func TemporalBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(RepoRoot(t), "bin", "temporal")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	path, err := exec.LookPath("temporal")
	Need(t, err == nil, "temporal CLI neither at %s (make temporal) nor on PATH", bin)
	return path
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
// Another process can take it before the caller binds it, so callers that
// start servers on it should fail clearly when the bind fails.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Runtimes lists the OCI runtimes the Docker sandbox suites run under:
// AGENTFLOW_TEST_RUNTIMES, comma-separated (CI sets "runc,runsc"); default
// "runc".
func Runtimes() []string {
	var out []string
	for _, r := range strings.Split(os.Getenv("AGENTFLOW_TEST_RUNTIMES"), ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		out = []string{"runc"}
	}
	return out
}
