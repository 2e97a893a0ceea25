package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// deps lists the packages a main package links.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	require.NoError(t, err, "go list -deps %s", pkg)
	return strings.Fields(string(out))
}

// heavy are the packages whose init the lean build exists to avoid.
func heavy(pkgs []string) []string {
	var bad []string
	for _, p := range pkgs {
		if strings.HasPrefix(p, "go.temporal.io/") || strings.HasPrefix(p, "github.com/docker/") ||
			p == "github.com/agentflow/agentflow/internal/cli/engine" {
			bad = append(bad, p)
		}
	}
	return bad
}

func TestLeanBinaryLinksNoTemporalOrDocker(t *testing.T) {
	require.Empty(t, heavy(deps(t, ".")), "the lean agentctl must not link Temporal, Docker or the engine verbs")
	// The check itself sees them where they are: the full build links all three.
	full := heavy(deps(t, "../agentctl"))
	require.Contains(t, full, "github.com/agentflow/agentflow/internal/cli/engine")
	require.Contains(t, full, "go.temporal.io/sdk/client")
	require.Contains(t, full, "github.com/docker/docker/client")
}
