//go:build integration

package deploy

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The compose file is valid for Docker Compose itself (`docker-compose
// config`), as CI checks on every change, and has no default password:
// without the secrets make compose-up writes, it refuses to start, naming
// what is missing.
func TestComposeConfig(t *testing.T) {
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		if os.Getenv("AGENTFLOW_REQUIRE_DOCKER") == "1" {
			t.Fatalf("docker-compose not found: %v", err)
		}
		t.Skip("docker-compose not installed")
	}
	secrets := []string{"POSTGRES_PASSWORD=p", "MINIO_ROOT_PASSWORD=m", "GRAFANA_ADMIN_PASSWORD=g", "AGENTFLOW_COMPOSE_DIR=" + t.TempDir()}
	for _, profile := range []string{"", "grafana"} {
		cmd := exec.Command(bin, "-f", composeFile, "config", "-q")
		cmd.Env = append(withoutSecrets(), secrets...)
		if profile != "" {
			cmd.Env = append(cmd.Env, "COMPOSE_PROFILES="+profile)
		}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "docker-compose config (profile %q): %s", profile, out)
	}
	for _, missing := range []string{"POSTGRES_PASSWORD", "MINIO_ROOT_PASSWORD", "GRAFANA_ADMIN_PASSWORD"} {
		cmd := exec.Command(bin, "-f", composeFile, "config", "-q")
		cmd.Env = withoutSecrets()
		for _, s := range secrets {
			if !strings.HasPrefix(s, missing+"=") {
				cmd.Env = append(cmd.Env, s)
			}
		}
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "docker-compose config without %s", missing)
		require.Contains(t, string(out), missing)
	}
}

// withoutSecrets is the environment minus the stack's variables, so a
// developer's shell cannot make the test pass.
func withoutSecrets() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "POSTGRES_PASSWORD", "MINIO_ROOT_PASSWORD", "GRAFANA_ADMIN_PASSWORD", "AGENTFLOW_COMPOSE_DIR", "COMPOSE_PROFILES":
		default:
			env = append(env, kv)
		}
	}
	return env
}
