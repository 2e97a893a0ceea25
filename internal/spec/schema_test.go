package spec

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func TestSchemaIsUpToDate(t *testing.T) {
	want, err := JSONSchema()
	require.NoError(t, err)
	got, err := os.ReadFile("../../schema/agentflow.schema.json")
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "schema/agentflow.schema.json is stale: run go generate ./internal/spec")
}

// TestSchemaCoversSeeds walks the seed specs and checks every key they use
// is a property the schema declares (a cheap stand-in for a full JSON
// Schema validator, which is not among our dependencies).
func TestSchemaCoversSeeds(t *testing.T) {
	b, err := JSONSchema()
	require.NoError(t, err)
	var schema map[string]any
	require.NoError(t, json.Unmarshal(b, &schema))
	defs := schema["definitions"].(map[string]any)

	resolve := func(s map[string]any) map[string]any {
		for {
			if all, ok := s["allOf"].([]any); ok {
				s = all[0].(map[string]any)
				continue
			}
			if ref, ok := s["$ref"].(string); ok {
				s = defs[ref[len("#/definitions/"):]].(map[string]any)
				continue
			}
			if alts, ok := s["anyOf"].([]any); ok {
				s = alts[0].(map[string]any)
				continue
			}
			if items, ok := s["items"].(map[string]any); ok && s["type"] == "array" {
				s = items
				continue
			}
			return s
		}
	}
	var walk func(n *yaml.Node, s map[string]any, path string)
	walk = func(n *yaml.Node, s map[string]any, path string) {
		s = resolve(s)
		props, ok := s["properties"].(map[string]any)
		switch n.Kind {
		case yaml.MappingNode:
			if !ok {
				return // free-form object (inputs, env)
			}
			for i := 0; i < len(n.Content); i += 2 {
				k := n.Content[i].Value
				ps, ok := props[k].(map[string]any)
				require.True(t, ok, "%s.%s not in schema", path, k)
				walk(n.Content[i+1], ps, path+"."+k)
			}
		case yaml.SequenceNode:
			for _, item := range n.Content {
				walk(item, s, path+"[]")
			}
		}
	}
	for _, f := range []string{"../../specs/complaint-handler.yaml", "../../specs/daily-tech-news.yaml"} {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var doc yaml.Node
		require.NoError(t, yaml.Unmarshal(data, &doc))
		walk(doc.Content[0], schema, f)
	}
}
