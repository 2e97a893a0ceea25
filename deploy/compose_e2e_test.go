//go:build e2e

package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/testenv"
)

// The shipped stack, end to end: every image built here
// (deploy/build-images.sh), docker-compose.yml brought up as it is, the
// demo spec run through its two workers, and each part checked from
// outside: the run SUCCEEDED on the PostgreSQL-backed server, both
// workers poll, checkpoints are in MinIO, Prometheus scrapes both workers
// and loaded the alerts, the Web UI lists the run. Grafana is the one
// service not started: its image cannot be built here (docker-compose.yml).
func TestComposeStack(t *testing.T) {
	compose, err := exec.LookPath("docker-compose")
	testenv.Need(t, err == nil, "docker-compose not installed")
	docker := testenv.Docker(t)
	root := testenv.RepoRoot(t)
	images := filepath.Join(root, ".data", "images.json")
	_, err = os.Stat(images)
	testenv.Need(t, err == nil, "%s missing (make images)", images)

	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()

	// Static agentctl binaries for the image (the rootfs has no libc).
	bin := t.TempDir()
	for out, pkg := range map[string]string{"agentctl": "./cmd/agentctl-lean", "agentctl-engine": "./cmd/agentctl"} {
		build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(bin, out), pkg)
		build.Dir = root
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	require.NoError(t, os.Symlink(testenv.TemporalBinary(t), filepath.Join(bin, "temporal")))
	run(t, ctx, root, []string{"AGENTFLOW_BIN_DIR=" + bin}, filepath.Join(root, "deploy", "build-images.sh"), "all")

	secrets := t.TempDir()
	run(t, ctx, root, nil, filepath.Join(root, "deploy", "compose-env.sh"), secrets)
	project := fmt.Sprintf("agentflow-e2e-%d", time.Now().UnixNano()%1_000_000)
	temporalPort, uiPort, promPort := testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)
	env := []string{
		"COMPOSE_PROJECT_NAME=" + project,
		"TEMPORAL_PORT=" + strconv.Itoa(temporalPort),
		"TEMPORAL_UI_PORT=" + strconv.Itoa(uiPort),
		"PROMETHEUS_PORT=" + strconv.Itoa(promPort),
	}
	dc := func(ctx context.Context, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, compose, append([]string{"--env-file", filepath.Join(secrets, "env"), "-f", filepath.Join(root, "docker-compose.yml")}, args...)...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// Cleanup runs after the test's context is canceled: its own.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if t.Failed() {
			out, _ := dc(ctx, "logs", "--no-color", "--tail", "40")
			t.Logf("docker-compose logs:\n%s", out)
		}
		out, err := dc(ctx, "down", "-v", "--remove-orphans", "--timeout", "20")
		if err != nil {
			t.Errorf("docker-compose down: %v\n%s", err, out)
		}
		mine := filters.NewArgs(filters.Arg("label", "com.docker.compose.project="+project))
		if left, err := docker.ContainerList(ctx, container.ListOptions{All: true, Filters: mine}); err != nil || len(left) > 0 {
			t.Errorf("containers of the stack left after down: %d (%v)", len(left), err)
		}
		if left, err := docker.VolumeList(ctx, volume.ListOptions{Filters: mine}); err != nil || len(left.Volumes) > 0 {
			t.Errorf("volumes of the stack left after down -v: %d (%v)", len(left.Volumes), err)
		}
		if left, err := docker.NetworkList(ctx, network.ListOptions{Filters: mine}); err != nil || len(left) > 0 {
			t.Errorf("networks of the stack left after down: %d (%v)", len(left), err)
		}
	})
	if out, err := dc(ctx, "up", "-d"); err != nil {
		t.Fatalf("docker-compose up: %v\n%s", err, out)
	}

	// The demo through the stack, as make compose-demo runs it: the tools
	// registered and specs/demo.yaml run with --wait (exit 0 = SUCCEEDED).
	address := fmt.Sprintf("127.0.0.1:%d", temporalPort)
	agentctl := filepath.Join(bin, "agentctl")
	demo := exec.CommandContext(ctx, filepath.Join(root, "scripts", "demo.sh"))
	demo.Dir = root
	demo.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+address, "AGENTCTL_BIN="+agentctl, "AGENTFLOW_IMAGES="+images)
	out, err := demo.CombinedOutput()
	require.NoError(t, err, "the demo through the compose stack:\n%s", out)
	require.Contains(t, string(out), "SUCCEEDED")
	agent := demoAgent(t, string(out))

	c, err := client.Dial(client.Options{HostPort: address})
	require.NoError(t, err)
	defer c.Close()

	// Both workers poll the run queue (their identities differ: one
	// container each).
	tq, err := c.DescribeTaskQueue(ctx, "agentflow", enumspb.TASK_QUEUE_TYPE_ACTIVITY)
	require.NoError(t, err)
	pollers := map[string]bool{}
	for _, p := range tq.GetPollers() {
		pollers[p.GetIdentity()] = true
	}
	require.GreaterOrEqual(t, len(pollers), 2, "activity pollers on the run queue: %v", pollers)

	// The checkpoints went to the shared bucket, not a worker's disk.
	ls, err := dc(ctx, "exec", "-T", "minio", "busybox", "ls", "/data/agentflow/stack/checkpoints")
	require.NoError(t, err, ls)
	require.Contains(t, ls, ".json", "no checkpoint manifest in MinIO")

	// Prometheus scrapes both workers and evaluates the alerting rules.
	prom := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var r struct {
			Data struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
					Value  []any             `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if !assert.NoError(c, getJSON(ctx, prom+`/api/v1/query?query=up%7Bjob%3D%22agentflow-worker%22%7D`, &r)) {
			return
		}
		up := 0
		for _, s := range r.Data.Result {
			if len(s.Value) == 2 && s.Value[1] == "1" {
				up++
			}
		}
		assert.Equal(c, 2, up, "workers up in Prometheus: %+v", r.Data.Result)
	}, 90*time.Second, time.Second)
	var rules struct {
		Data struct {
			Groups []struct {
				Rules []struct{ Name string } `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	require.NoError(t, getJSON(ctx, prom+"/api/v1/rules", &rules))
	require.NotEmpty(t, rules.Data.Groups, "Prometheus loaded no alerting rules")

	// The Web UI serves its front end and, through its API, the run.
	ui := fmt.Sprintf("http://127.0.0.1:%d", uiPort)
	page, err := get(ctx, ui+"/")
	require.NoError(t, err)
	require.Contains(t, strings.ToLower(page), "<html")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		body, err := get(ctx, ui+"/api/v1/namespaces/default/workflows?query="+url.QueryEscape(fmt.Sprintf("WorkflowId='%s'", agent)))
		if assert.NoError(c, err) {
			assert.Contains(c, body, agent, "the Web UI's workflow list does not show the run")
		}
	}, 30*time.Second, time.Second)
}

// demoAgent is the agent name scripts/demo.sh printed ("… as <name>").
func demoAgent(t *testing.T, out string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if _, name, ok := strings.Cut(line, "running specs/demo.yaml as "); ok {
			return strings.TrimSpace(name)
		}
	}
	t.Fatalf("no agent name in the demo's output:\n%s", out)
	return ""
}

func run(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %.300s", url, resp.Status, b)
	}
	return string(b), nil
}

func getJSON(ctx context.Context, url string, v any) error {
	body, err := get(ctx, url)
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(body), v)
}
