package testenv

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
)

// An OCI registry (the distribution project's `registry`) on loopback, for
// the image pull tests. Docker treats 127.0.0.0/8 registries as insecure
// (plain HTTP) by default, so no TLS is needed.

// ImageRegistryVersion is the distribution registry scripts/test-servers.sh
// builds (`go install github.com/distribution/distribution/v3/cmd/registry@…`).
const ImageRegistryVersion = "v3.1.2"

// The one account of an ImageRegistry started WithAuth. The hash is
// bcrypt (the only scheme the registry's htpasswd accepts) of the password,
// computed once: the standard library has no bcrypt and the repository
// takes no dependency for a test fixture.
const (
	RegistryUser     = "agentflow"
	RegistryPassword = "agentflow-registry-test-pw"
	registryHtpasswd = RegistryUser + ":$2a$05$uaEFScZzMZerO4IEI0jobusMLQurkcWH62k7SXcKIZhamt/E5N6Iq\n"
)

// ImageRegistry is a running registry; Stop and Start it for outage tests
// (same port, same storage).
type ImageRegistry struct {
	// Addr is "127.0.0.1:PORT", the registry part of image references.
	Addr string
	t    testing.TB
	bin  string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// ImageRegistryOptions configure StartImageRegistry.
type ImageRegistryOptions struct {
	// WithAuth requires RegistryUser/RegistryPassword (htpasswd basic auth).
	WithAuth bool
}

// StartImageRegistry starts a registry on a free loopback port with its
// storage in a temp dir, stopped when t ends. The binary is
// $AGENTFLOW_REGISTRY, else the one scripts/test-servers.sh registry builds;
// without it t skips (fails under AGENTFLOW_REQUIRE_DOCKER=1).
func StartImageRegistry(t testing.TB, opts ImageRegistryOptions) *ImageRegistry {
	t.Helper()
	bin := os.Getenv("AGENTFLOW_REGISTRY")
	if bin == "" {
		cache := os.Getenv("AGENTFLOW_CACHE")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache", "agentflow")
		}
		bin = filepath.Join(cache, "registry-"+ImageRegistryVersion, "registry")
	}
	_, err := os.Stat(bin)
	Need(t, err == nil, "registry binary not at %s (run scripts/test-servers.sh registry, or set AGENTFLOW_REGISTRY)", bin)

	dir := t.TempDir()
	r := &ImageRegistry{Addr: fmt.Sprintf("127.0.0.1:%d", FreePort(t)), t: t, bin: bin, dir: dir}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	cfg := fmt.Sprintf(`version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: %q}, delete: {enabled: true}}
http: {addr: %q, secret: %q}
`, filepath.Join(dir, "data"), r.Addr, hex.EncodeToString(secret))
	if opts.WithAuth {
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(registryHtpasswd), 0o600); err != nil {
			t.Fatalf("registry htpasswd: %v", err)
		}
		cfg += fmt.Sprintf("auth: {htpasswd: {realm: agentflow-test, path: %q}}\n", htpasswd)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatalf("registry config: %v", err)
	}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// Start (re)starts a stopped registry and waits until it answers.
func (r *ImageRegistry) Start() {
	r.t.Helper()
	if r.cmd != nil {
		r.t.Fatalf("registry %s: already running", r.Addr)
	}
	logf, err := os.OpenFile(filepath.Join(r.dir, "registry.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		r.t.Fatalf("registry log: %v", err)
	}
	defer logf.Close()
	cmd := exec.Command(r.bin, "serve", filepath.Join(r.dir, "config.yml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	// v3 exports traces by default; nothing listens for them here.
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none")
	// Killed with the test binary: a crashed test leaves no server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("start registry: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	r.cmd, r.done = cmd, done

	// Ready when /v2/ answers at all (401 with auth, 200 without).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Addr+"/v2/", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-done:
			r.cmd = nil
			log, _ := os.ReadFile(filepath.Join(r.dir, "registry.log"))
			r.t.Fatalf("registry exited before it was ready:\n%s", log)
		case <-ctx.Done():
			r.Stop()
			r.t.Fatalf("registry not ready at %s", r.Addr)
		case <-tick.C:
		}
	}
}

// Stop ends the registry and waits for it. Idempotent.
func (r *ImageRegistry) Stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
	}
	r.cmd = nil
}

// RegistryAuth encodes credentials for the Docker API's X-Registry-Auth
// (an empty user is anonymous).
func RegistryAuth(addr, user, password string) string {
	s, _ := registry.EncodeAuthConfig(registry.AuthConfig{Username: user, Password: password, ServerAddress: addr})
	return s
}

// PushedImage is an image that exists only in a registry.
type PushedImage struct {
	Ref string // "ADDR/REPO@sha256:…", what a step names
	ID  string // the image ID it had locally (now removed)
}

// PushOnlyImage makes an image of its own from base (a new image ID: base
// plus a label unique to this call, so removing it never touches base or
// another test's image), pushes it to repo (ADDR/NAME) with auth, and
// removes it from the local daemon, so the registry is the only place it
// is. Whatever a test pulls of it later is removed when t ends.
func PushOnlyImage(t testing.TB, c *client.Client, base, repo, auth string) PushedImage {
	t.Helper()
	ctx := context.Background()
	nonce := make([]byte, 6)
	_, _ = rand.Read(nonce)
	tag := repo + ":push-" + hex.EncodeToString(nonce)
	cr, err := c.ContainerCreate(ctx, &container.Config{Image: base, Entrypoint: []string{"true"},
		Labels: map[string]string{"agentflow.test": "1", "agentflow.managed": "true"}}, nil, nil, nil, "")
	if err != nil {
		t.Fatalf("create container from %s: %v", base, err)
	}
	commit, err := c.ContainerCommit(ctx, cr.ID, container.CommitOptions{Reference: tag,
		Changes: []string{"LABEL agentflow.test=1", "LABEL agentflow.test.push=" + hex.EncodeToString(nonce)}})
	_ = c.ContainerRemove(ctx, cr.ID, container.RemoveOptions{Force: true})
	if err != nil {
		t.Fatalf("commit %s: %v", tag, err)
	}
	id := commit.ID
	t.Cleanup(func() { removeImage(c, id) })

	if auth == "" {
		auth = RegistryAuth("", "", "")
	}
	rc, err := c.ImagePush(ctx, tag, image.PushOptions{RegistryAuth: auth})
	if err != nil {
		t.Fatalf("push %s: %v", tag, err)
	}
	digest, err := pushedDigest(rc)
	rc.Close()
	if err != nil {
		t.Fatalf("push %s: %v", tag, err)
	}
	removeImage(c, id)
	if _, err := c.ImageInspect(ctx, id); !errdefs.IsNotFound(err) {
		t.Fatalf("image %s still present after removal: %v", id, err)
	}
	return PushedImage{Ref: repo + "@" + digest, ID: id}
}

// removeImage removes an image of this package's making with every tag and
// digest reference it has, never its parent.
func removeImage(c *client.Client, id string) {
	_, _ = c.ImageRemove(context.Background(), id, image.RemoveOptions{Force: true, PruneChildren: false})
}

// pushedDigest drains a push progress stream and returns the manifest
// digest it reports.
func pushedDigest(r io.Reader) (string, error) {
	dec := json.NewDecoder(r)
	var digest string
	for {
		var msg struct {
			Error string `json:"error"`
			Aux   struct {
				Digest string `json:"Digest"`
			} `json:"aux"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", err
		}
		if msg.Error != "" {
			return "", errors.New(msg.Error)
		}
		if msg.Aux.Digest != "" {
			digest = msg.Aux.Digest
		}
	}
	if !strings.HasPrefix(digest, "sha256:") {
		return "", fmt.Errorf("no digest in the push stream (got %q)", digest)
	}
	return digest, nil
}

// DockerConfigDir writes a Docker client config.json with content (a JSON
// object) into a temp dir and returns the dir.
func DockerConfigDir(t testing.TB, content map[string]any) string {
	t.Helper()
	dir := t.TempDir()
	b, err := json.Marshal(content)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// BasicAuthConfig is a config.json "auths" entry for addr.
func BasicAuthConfig(addr, user, password string) map[string]any {
	return map[string]any{"auths": map[string]any{addr: map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password)),
	}}}
}
