//go:build integration

package activities

import (
	"archive/tar"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/exechost/docker"
)

const encleakTag = "agentflow/tool-encleak:1.0"

// leaksEncoded reports whether any run of base64 or hex characters in s
// decodes, at any alignment, to text holding 6 consecutive bytes of secret,
// or whether s holds them plainly or URL-escaped.
func leaksEncoded(s, secret string) bool {
	hit := func(b string) bool {
		for i := 0; i+6 <= len(secret); i++ {
			if strings.Contains(b, secret[i:i+6]) {
				return true
			}
		}
		return false
	}
	isB64 := func(r rune) bool {
		return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("+/-_", r)
	}
	for _, run := range strings.FieldsFunc(s, func(r rune) bool { return !isB64(r) }) {
		std := strings.NewReplacer("-", "+", "_", "/").Replace(run)
		for off := 0; off < 4 && off < len(std); off++ {
			x := std[off:]
			if b, err := base64.RawStdEncoding.DecodeString(x[:len(x)/4*4]); err == nil && hit(string(b)) {
				return true
			}
		}
		for off := 0; off < 2 && off < len(run); off++ {
			x := run[off:]
			if b, err := hex.DecodeString(x[:len(x)/2*2]); err == nil && hit(string(b)) {
				return true
			}
		}
	}
	return hit(s)
}

// TestEncodedSecretsDoNotLeaveARealSandbox runs the hostile encleak tool
// through RunStep on the Docker host: it prints the step's secret in every
// common encoding on stdout and stderr and writes it into the workspace.
// Neither the step output, nor the step log, nor the stored checkpoint may
// hold any of them.
func TestEncodedSecretsDoNotLeaveARealSandbox(t *testing.T) {
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err = c.Ping(ctx)
		cancel()
	}
	if err != nil {
		if os.Getenv("AGENTFLOW_REQUIRE_DOCKER") == "1" {
			t.Fatalf("AGENTFLOW_REQUIRE_DOCKER=1 but no Docker daemon answers: %v", err)
		}
		t.Skipf("skipping: no Docker daemon answers (%v)", err)
	}
	defer c.Close()
	img, err := c.ImageInspect(t.Context(), encleakTag)
	if errdefs.IsNotFound(err) {
		t.Fatalf("image %s not found: run `make images` (tools/build-images.sh) first", encleakTag)
	}
	require.NoError(t, err)

	suite := fmt.Sprintf("activities-encleak-%d", os.Getpid())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		list, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "agentflow.test.suite="+suite))})
		if err != nil {
			t.Errorf("list leftover containers: %v", err)
			return
		}
		for _, s := range list {
			_ = c.ContainerRemove(ctx, s.ID, container.RemoveOptions{Force: true})
		}
		if len(list) > 0 {
			t.Errorf("%d container(s) left behind", len(list))
		}
	})
	store, err := checkpoint.NewLocal(t.TempDir())
	require.NoError(t, err)
	host, err := docker.New(docker.Options{Client: c, Store: store, KillGrace: time.Second})
	require.NoError(t, err)

	for _, tc := range []struct{ name, source string }{
		{"secret from env", "env"},
		{"secret from input", "input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.other = host
			h.opts.Labels = map[string]string{"agentflow.test": "1", "agentflow.test.suite": suite}
			req := baseReq()
			req.Tool, req.Image, req.Checkpoints = "encleak:1.0", img.ID, nil
			req.StepID = "leak_" + tc.source
			req.Timeout = 2 * time.Minute
			req.Resources.MemoryBytes, req.Resources.DiskBytes = 128<<20, 16<<20
			req.SecretSources = map[string]string{"api_token": "env://AF_TEST_TOKEN"}
			req.Env = map[string]string{"LOG_LEVEL": "debug"}
			if tc.source == "env" {
				req.Env["LEAK"] = "{{ .secrets.api_token }}"
				req.Input = map[string]any{"env": "LEAK", "file": "out/leak.txt"}
			} else {
				req.Input = map[string]any{"secret": "{{ .secrets.api_token }}", "file": "out/leak.txt"}
			}

			res, err := h.run(t, req)
			require.NoError(t, err)

			// Step output: every form is there, none carries the secret.
			out, err := json.Marshal(res.Output)
			require.NoError(t, err)
			forms, _ := res.Output["forms"].(map[string]any)
			require.Len(t, forms, 18, "the tool printed every form: %s", out)
			require.False(t, leaksEncoded(string(out), testSecret), "output leaks: %s", out)

			// Step log (stderr).
			log := h.log(t, req)
			require.Contains(t, log, "b64_std_2: ")
			require.False(t, leaksEncoded(log, testSecret), "log leaks: %s", log)

			// Checkpoint: the file is there, same length, redacted.
			_, rc, err := store.Get(t.Context(), exechost.CheckpointID(res.CheckpointID))
			require.NoError(t, err)
			defer rc.Close()
			tr := tar.NewReader(rc)
			found := false
			for {
				hdr, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				data, err := io.ReadAll(tr)
				require.NoError(t, err)
				if strings.TrimPrefix(hdr.Name, "./") == "out/leak.txt" {
					found = true
					require.Contains(t, string(data), "b64_url_1: ")
					require.Contains(t, string(data), "*****")
					require.False(t, leaksEncoded(string(data), testSecret), "checkpoint leaks: %s", data)
				}
			}
			require.True(t, found, "out/leak.txt is in the checkpoint")
		})
	}
}
