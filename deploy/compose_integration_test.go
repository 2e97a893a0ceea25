//go:build integration

package deploy

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// The compose file is valid for Docker Compose itself (`docker-compose
// config`), as CI checks on every change.
func TestComposeConfig(t *testing.T) {
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		if os.Getenv("AGENTFLOW_REQUIRE_DOCKER") == "1" {
			t.Fatalf("docker-compose not found: %v", err)
		}
		t.Skip("docker-compose not installed")
	}
	out, err := exec.Command(bin, "-f", composeFile, "config", "-q").CombinedOutput()
	require.NoError(t, err, "docker-compose config: %s", out)
}
