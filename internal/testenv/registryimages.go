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
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
)

// Helpers of the image pull tests around a Registry: an image that exists
// only in the registry, and the worker-side Docker config that pulls it.

// The one account of a Registry started WithAuth. The hash is
// bcrypt (the only scheme the registry's htpasswd accepts) of the password,
// computed once: the standard library has no bcrypt and the repository
// takes no dependency for a test fixture.
const (
	RegistryUser     = "agentflow"
	RegistryPassword = "agentflow-registry-test-pw"
	registryHtpasswd = RegistryUser + ":$2a$05$uaEFScZzMZerO4IEI0jobusMLQurkcWH62k7SXcKIZhamt/E5N6Iq\n"
)

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
