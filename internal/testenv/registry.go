package testenv

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// RegistryServer is a real OCI distribution registry on loopback with its
// own storage directory, stopped when the test ends. Docker treats
// 127.0.0.0/8 registries as insecure (plain HTTP) without configuration.
type RegistryServer struct {
	Addr    string // "127.0.0.1:PORT", the image reference prefix
	DataDir string

	p *process
	t testing.TB
}

// RegistryOptions configure RegistryWith.
type RegistryOptions struct {
	// WithAuth requires RegistryUser/RegistryPassword (htpasswd basic
	// auth) for every request.
	WithAuth bool
}

// Registry starts a registry for t (binary from AGENTFLOW_REGISTRY or the
// scripts/test-servers.sh cache; missing → skip, or fail under
// AGENTFLOW_REQUIRE_DOCKER=1).
func Registry(t testing.TB) *RegistryServer {
	t.Helper()
	return RegistryWith(t, RegistryOptions{})
}

// RegistryWith is Registry with options.
func RegistryWith(t testing.TB, opts RegistryOptions) *RegistryServer {
	t.Helper()
	bin := serverBinary(t, "AGENTFLOW_REGISTRY", "registry", RegistryVersion)
	dir := t.TempDir()
	addr := hostPort(FreePort(t))
	r := &RegistryServer{Addr: addr, DataDir: filepath.Join(dir, "data"), t: t}
	// The registry wants a config file; the variables override it (they
	// are what the brief of the test servers names, and what an operator
	// would set).
	cfg := filepath.Join(dir, "config.yml")
	text := "version: 0.1\nlog:\n  level: warn\nstorage:\n  delete:\n    enabled: true\n  filesystem:\n    rootdirectory: " + r.DataDir + "\nhttp:\n  addr: " + addr + "\n"
	ready := http.StatusOK
	if opts.WithAuth {
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(registryHtpasswd), 0o600); err != nil {
			t.Fatalf("registry htpasswd: %v", err)
		}
		text += "auth:\n  htpasswd:\n    realm: agentflow-test\n    path: " + htpasswd + "\n"
		ready = http.StatusUnauthorized // /v2/ answers 401 to an anonymous probe
	}
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatalf("registry config: %v", err)
	}
	r.p = &process{
		name: "registry",
		bin:  bin,
		args: []string{"serve", cfg},
		env: []string{
			"REGISTRY_HTTP_ADDR=" + addr,
			"REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY=" + r.DataDir,
			"OTEL_TRACES_EXPORTER=none", // v3 exports traces by default; nothing listens here
		},
		logPath:     filepath.Join(dir, "registry.log"),
		readyURL:    "http://" + addr + "/v2/",
		readyStatus: ready,
	}
	r.p.start(t)
	t.Cleanup(r.Stop)
	return r
}

// Stop stops the registry; idempotent, runs at the end of the test.
func (r *RegistryServer) Stop() { r.p.stop() }

// Start restarts a stopped registry on the same port and storage; a
// failure fails the test Registry was started for.
func (r *RegistryServer) Start() {
	r.t.Helper()
	r.p.start(r.t)
}

// Log is the tail of the registry's log, for failure messages.
func (r *RegistryServer) Log() string { return r.p.logTail() }
