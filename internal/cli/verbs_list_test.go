package cli

import (
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// The lean build (no constructors) lists every verb of the table, in table
// order, with the table's short help, each as a forwarding stub.
func TestLeanRootListsEveryEngineVerb(t *testing.T) {
	root := NewRootCmd("test", Streams{}, nil)
	for _, v := range EngineVerbs {
		cmd, _, err := root.Find([]string{v.Name})
		require.NoError(t, err, v.Name)
		require.Equal(t, v.Name, cmd.Name())
		require.Equal(t, v.Short, cmd.Short, v.Name)
		require.True(t, cmd.DisableFlagParsing, "%s must forward its flags untouched", v.Name)
	}
	var names []string
	for _, c := range root.Commands() {
		names = append(names, c.Name())
	}
	require.Subset(t, names, []string{"validate", "graph"})
	require.Len(t, names, len(EngineVerbs)+2, "lean verbs: %v", names)
}

func TestCheckConstructorsRefusesDrift(t *testing.T) {
	stub := func(o *Options) *cobra.Command { return &cobra.Command{Use: "x"} }
	full := Constructors{}
	for _, v := range EngineVerbs {
		full[v.Name] = stub
	}
	require.NoError(t, CheckConstructors(full))

	missing := Constructors{}
	for _, v := range EngineVerbs[1:] {
		missing[v.Name] = stub
	}
	require.ErrorContains(t, CheckConstructors(missing), `engine verb "`+EngineVerbs[0].Name+`" has no constructor`)

	extra := Constructors{"frobnicate": stub}
	for _, v := range EngineVerbs {
		extra[v.Name] = stub
	}
	require.ErrorContains(t, CheckConstructors(extra), `constructor "frobnicate" is not in the verb table`)

	require.Panics(t, func() { NewRootCmd("test", Streams{}, missing) })
}
