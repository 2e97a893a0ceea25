package cli

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// The lean build forwards exactly the verbs listed in verbs.go; a verb added
// to the full build but not there would be missing from `agentctl --help`.
func TestEngineVerbsListMatchesFullBuild(t *testing.T) {
	root := NewRootCmd("test", Streams{})
	var full []string
	for _, c := range root.Commands() {
		switch c.Name() {
		case "validate", "graph", "help", "completion":
			continue
		}
		full = append(full, c.Name())
	}
	var listed []string
	for _, v := range engineVerbs {
		listed = append(listed, v.Name)
	}
	slices.Sort(full)
	slices.Sort(listed)
	require.Equal(t, full, listed)
}
