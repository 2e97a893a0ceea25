package hosttest_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestContractKitDoesNotImportDockerHost: a gVisor or microVM host author
// imports exechost and hosttest and nothing Docker. The contract kit's
// validation and redaction are exechost's, not the Docker host's.
func TestContractKitDoesNotImportDockerHost(t *testing.T) {
	for _, pkg := range []string{"github.com/agentflow/agentflow/exechost/hosttest", "github.com/agentflow/agentflow/exechost"} {
		out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, "%s", out)
		deps := strings.Fields(string(out))
		require.Contains(t, deps, "github.com/agentflow/agentflow/exechost", "go list output is not the dependency list")
		for _, d := range deps {
			require.False(t, strings.HasPrefix(d, "github.com/agentflow/agentflow/exechost/docker"), "%s imports %s", pkg, d)
			require.False(t, strings.HasPrefix(d, "github.com/docker/"), "%s imports %s", pkg, d)
		}
	}
}
