package deploy

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/cli"
	"github.com/agentflow/agentflow/internal/cli/engine"
	"github.com/agentflow/agentflow/internal/devserver"
)

// composeFile is the shipped stack (make compose-up).
const composeFile = "../docker-compose.yml"

// Every agentctl flag the compose stack passes exists, and none is
// deprecated: a renamed flag must not leave the stack behind (a worker
// that refuses to start is only found when someone runs it).
func TestComposeUsesCurrentAgentctlFlags(t *testing.T) {
	b, err := os.ReadFile(composeFile)
	require.NoError(t, err)
	var doc struct {
		Services map[string]struct {
			Image      string   `yaml:"image"`
			Entrypoint []string `yaml:"entrypoint"`
			Command    []string `yaml:"command"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(b, &doc))
	root := cli.NewRootCmd("test", cli.Streams{}, engine.Commands())
	checked := 0
	for name, svc := range doc.Services {
		if len(svc.Entrypoint) > 0 || len(svc.Command) == 0 || !strings.HasPrefix(svc.Image, "agentflow/agentctl") {
			continue // not agentctl (the dev server runs the temporal binary)
		}
		cmd, _, err := root.Find(svc.Command[:1])
		require.NoError(t, err, "service %s: verb %q", name, svc.Command[0])
		for _, arg := range svc.Command[1:] {
			if !strings.HasPrefix(arg, "--") {
				continue
			}
			flag, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
			f := cmd.Flags().Lookup(flag)
			if f == nil {
				f = root.PersistentFlags().Lookup(flag)
			}
			require.NotNil(t, f, "service %s: agentctl %s has no flag --%s", name, svc.Command[0], flag)
			require.Empty(t, f.Deprecated, "service %s: --%s is deprecated", name, flag)
			checked++
		}
	}
	require.Positive(t, checked, "no agentctl service found in %s", composeFile)
}

// deploy/temporal/dynamicconfig.yaml (the full server's, in the tests and
// make up TEMPORAL=postgres) sets exactly what the dev server gets.
func TestTemporalDynamicConfigMatchesTheDevServer(t *testing.T) {
	b, err := os.ReadFile("temporal/dynamicconfig.yaml")
	require.NoError(t, err)
	var doc map[string][]struct {
		Value any `yaml:"value"`
	}
	require.NoError(t, yaml.Unmarshal(b, &doc))
	var got []string
	for k, vs := range doc {
		require.Len(t, vs, 1, k)
		got = append(got, fmt.Sprintf("%s=%v", k, vs[0].Value))
	}
	require.ElementsMatch(t, devserver.DynamicConfig, got)
}
