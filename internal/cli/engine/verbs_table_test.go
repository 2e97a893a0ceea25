package engine

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/cli"
)

// The verb table (cli.EngineVerbs) equals the constructors registered here,
// and each constructor builds the verb it is registered under.
func TestEngineVerbTableEqualsConstructors(t *testing.T) {
	cons := Commands()
	require.NoError(t, cli.CheckConstructors(cons))
	require.Len(t, cons, len(cli.EngineVerbs))
	for _, v := range cli.EngineVerbs {
		cmd := cons[v.Name](&cli.Options{})
		require.Equal(t, v.Name, cmd.Name())
		require.Empty(t, cmd.Short, "%s: the short help belongs in the verb table (internal/cli/verbs.go)", v.Name)
	}
}

// `agentctl --help` and every verb's short help are the same text in the
// lean and the full build.
func TestHelpIdenticalInBothBuilds(t *testing.T) {
	help := func(c cli.Constructors, args ...string) string {
		var out, errb bytes.Buffer
		code := cli.Run(t.Context(), "test", args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb}, c)
		require.Equal(t, cli.ExitOK, code, errb.String())
		return out.String()
	}
	lean, full := help(nil, "--help"), help(Commands(), "--help")
	require.Equal(t, lean, full)
	for _, v := range cli.EngineVerbs {
		require.Contains(t, full, v.Short)
	}

	leanRoot := cli.NewRootCmd("test", cli.Streams{}, nil)
	fullRoot := cli.NewRootCmd("test", cli.Streams{}, Commands())
	lc, fc := leanRoot.Commands(), fullRoot.Commands()
	require.Equal(t, len(lc), len(fc))
	for i := range lc {
		require.Equal(t, lc[i].Name(), fc[i].Name())
		require.Equal(t, lc[i].Short, fc[i].Short, lc[i].Name())
	}
}

// Which Temporal each verb talks to (cli.AnnotationConnection): dev its
// own server (no profile), codec-server none; every other verb, the
// worker included, a cluster, from flags, variables and a profile.
func TestConnectionAnnotations(t *testing.T) {
	want := map[string]string{"dev": cli.ConnectionLocal, "codec-server": cli.ConnectionNone}
	for name, build := range Commands() {
		require.Equal(t, want[name], build(&cli.Options{}).Annotations[cli.AnnotationConnection], name)
	}
}
