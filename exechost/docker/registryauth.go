package docker

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/registry"
)

// The registry credentials of the worker: its Docker client configuration
// (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`), the file
// `docker login` writes. Only what a pull needs is read: `auths` entries
// (base64 `auth` or `username`/`password`, `identitytoken`), `credHelpers`
// and `credsStore`. The file belongs to the worker's operator; spec authors
// never choose which entry is used beyond naming the image's registry.

const (
	// dockerHubDomain is the domain reference.Domain reports for Docker Hub
	// images; config.json keys it under the legacy index URL.
	dockerHubDomain = "docker.io"
	dockerHubIndex  = "https://index.docker.io/v1/"
	// maxDockerConfig bounds what is read of config.json.
	maxDockerConfig = 1 << 20
	// maxHelperOutput bounds what is read from a credential helper.
	maxHelperOutput = 64 << 10
	// DefaultCredentialHelperTimeout bounds one `docker-credential-* get`.
	DefaultCredentialHelperTimeout = 10 * time.Second
)

// helperNameRe: a credential helper name becomes part of an executable name
// looked up on PATH; nothing that could name a path is accepted.
var helperNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// DefaultDockerConfigDir is where the Docker CLI keeps config.json:
// $DOCKER_CONFIG, else ~/.docker ("" when neither can be known).
func DefaultDockerConfigDir() string {
	if d := os.Getenv("DOCKER_CONFIG"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".docker")
}

// registryCredentials finds the credentials for one registry domain.
type registryCredentials struct {
	// dir holds config.json; "" means no configuration (anonymous pulls).
	dir string
	// helperTimeout bounds a credential helper run.
	helperTimeout time.Duration
}

// dockerConfig is the part of config.json a pull needs.
type dockerConfig struct {
	Auths       map[string]authEntry `json:"auths"`
	CredHelpers map[string]string    `json:"credHelpers"`
	CredsStore  string               `json:"credsStore"`
}

type authEntry struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
}

// credentials are what a pull sends, and where they came from (for
// messages: the source is named, never a secret).
type credentials struct {
	auth   registry.AuthConfig
	source string // "" = anonymous
}

// lookup returns the credentials for domain ("127.0.0.1:5000",
// "docker.io", "ghcr.io"). No configuration, or none for the domain, is an
// anonymous pull, not an error; an unreadable configuration or a failing
// helper is an error (the operator configured something that does not work).
func (rc registryCredentials) lookup(ctx context.Context, domain string) (credentials, error) {
	if rc.dir == "" {
		return credentials{}, nil
	}
	path := filepath.Join(rc.dir, "config.json")
	cfg, err := readDockerConfig(path)
	if errors.Is(err, os.ErrNotExist) {
		return credentials{}, nil
	}
	if err != nil {
		return credentials{}, err
	}
	// A registry's own helper wins over the store, as in the Docker CLI.
	helper := cfg.CredsStore
	if _, h, ok := findServer(cfg.CredHelpers, domain); ok {
		helper = h
	}
	if helper != "" {
		auth, found, err := runCredentialHelper(ctx, helper, serverKey(domain), rc.timeout())
		if err != nil {
			return credentials{}, err
		}
		if found {
			auth.ServerAddress = domain
			return credentials{auth: auth, source: "credential helper docker-credential-" + helper}, nil
		}
	}
	if key, e, ok := findServer(cfg.Auths, domain); ok {
		auth, ok, err := e.decode()
		if err != nil {
			return credentials{}, fmt.Errorf("docker config %s: auths[%q]: %w", path, key, err)
		}
		if ok {
			auth.ServerAddress = domain
			return credentials{auth: auth, source: fmt.Sprintf("%s auths[%q]", path, key)}, nil
		}
	}
	return credentials{}, nil
}

// findServer finds domain's entry in a config.json map: the exact key
// first, else the first key (in sorted order, so the choice is stable)
// naming the same host.
func findServer[V any](m map[string]V, domain string) (string, V, bool) {
	key := serverKey(domain)
	if v, ok := m[key]; ok {
		return key, v, true
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if configHost(k) == configHost(key) {
			return k, m[k], true
		}
	}
	var zero V
	return "", zero, false
}

func (rc registryCredentials) timeout() time.Duration {
	if rc.helperTimeout > 0 {
		return rc.helperTimeout
	}
	return DefaultCredentialHelperTimeout
}

func readDockerConfig(path string) (dockerConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return dockerConfig{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDockerConfig+1))
	if err != nil {
		return dockerConfig{}, fmt.Errorf("docker config %s: %w", path, err)
	}
	if len(b) > maxDockerConfig {
		return dockerConfig{}, fmt.Errorf("docker config %s: larger than %d bytes", path, maxDockerConfig)
	}
	var cfg dockerConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return dockerConfig{}, fmt.Errorf("docker config %s: %w", path, err)
	}
	return cfg, nil
}

// decode turns an auths entry into an AuthConfig; ok is false for an entry
// without credentials (the placeholder `docker login` writes when a
// credsStore holds the secret).
func (e authEntry) decode() (auth registry.AuthConfig, ok bool, err error) {
	auth.Username, auth.Password, auth.IdentityToken = e.Username, e.Password, e.IdentityToken
	if e.Auth != "" {
		raw, err := base64.StdEncoding.DecodeString(e.Auth)
		if err != nil {
			return registry.AuthConfig{}, false, errors.New("auth is not base64")
		}
		user, pass, found := strings.Cut(string(raw), ":")
		if !found {
			return registry.AuthConfig{}, false, errors.New("auth is not base64 of user:password")
		}
		auth.Username, auth.Password = user, pass
	}
	return auth, auth.Username != "" || auth.Password != "" || auth.IdentityToken != "", nil
}

// serverKey is how config.json names a registry: Docker Hub under its
// legacy index URL, everything else by its domain.
func serverKey(domain string) string {
	if domain == dockerHubDomain {
		return dockerHubIndex
	}
	return domain
}

// configHost reduces a config.json key ("https://host:port/v1/",
// "host:port") to its host[:port], as the Docker CLI matches them; all of
// Docker Hub's names read as one.
func configHost(key string) string {
	h := strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	h, _, _ = strings.Cut(h, "/")
	switch h {
	case "index.docker.io", "registry-1.docker.io", "docker.io":
		return "index.docker.io"
	}
	return h
}

// helperReply is the credential helper protocol's answer to `get`.
type helperReply struct {
	Username string `json:"Username"`
	Secret   string `json:"Secret"`
}

// errHelperNotFound is the helper protocol's "no credentials for that
// server" message (docker-credential-helpers' credentials.errCredentialsNotFound).
const errHelperNotFound = "credentials not found in native keychain"

// runCredentialHelper runs `docker-credential-<name> get` with server on
// stdin, bounded by timeout. found is false when the helper has nothing
// for server.
func runCredentialHelper(ctx context.Context, name, server string, timeout time.Duration) (registry.AuthConfig, bool, error) {
	if !helperNameRe.MatchString(name) {
		return registry.AuthConfig{}, false, fmt.Errorf("credential helper %q: not a helper name", name)
	}
	bin := "docker-credential-" + name
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "get")
	cmd.Stdin = strings.NewReader(server)
	var stdout, stderr limitedBuffer
	stdout.max, stderr.max = maxHelperOutput, 4<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second // a helper's child holding stdout open cannot hang us
	err := cmd.Run()
	if ctx.Err() != nil {
		return registry.AuthConfig{}, false, fmt.Errorf("credential helper %s: no answer within %s", bin, timeout)
	}
	if err != nil {
		// The protocol reports "not found" on stdout with a non-zero exit.
		if strings.Contains(stdout.String(), errHelperNotFound) {
			return registry.AuthConfig{}, false, nil
		}
		// Helper output may quote the server, never the secret it failed to
		// produce; stderr is included, bounded, for the operator.
		return registry.AuthConfig{}, false, fmt.Errorf("credential helper %s: %w: %s", bin, err, strings.TrimSpace(stderr.String()))
	}
	var r helperReply
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return registry.AuthConfig{}, false, fmt.Errorf("credential helper %s: malformed answer", bin)
	}
	if r.Username == "" && r.Secret == "" {
		return registry.AuthConfig{}, false, nil
	}
	// "<token>" as the user means the secret is an identity token.
	if r.Username == "<token>" {
		return registry.AuthConfig{IdentityToken: r.Secret}, true, nil
	}
	return registry.AuthConfig{Username: r.Username, Password: r.Secret}, true, nil
}

// limitedBuffer keeps the first max bytes written and drops the rest, so a
// chatty helper cannot grow the worker's memory.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
