// Command echo returns its input as its output, plus the list of files in
// the workspace; asked with "write_input", it also saves the input there.
// Tests use it to see exactly what a step received and what it inherited.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

//go:embed VERSION
var version string

var tool = toolkit.Tool{
	Name:    "echo",
	Version: version,
	Summary: "return the input object, plus workspace_files",
	Usage: `Input:  any JSON object; "write_input": true (writes input.json) or "path/in/workspace.json"
Output: the input object plus "workspace_files": [sorted relative paths] (and "written": path)`,
}

func main() { toolkit.Main(tool, handle) }

func handle(_ context.Context, env toolkit.Env, in map[string]any) (any, error) {
	if in == nil {
		in = map[string]any{}
	}
	root, err := env.OpenWorkspace()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	out := make(map[string]any, len(in)+2)
	for k, v := range in {
		out[k] = v
	}
	if target, err := writeTarget(in["write_input"]); err != nil {
		return nil, err
	} else if target != "" {
		data, err := json.MarshalIndent(in, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("encode input: %w", err)
		}
		if err := toolkit.WriteFile(root, target, append(data, '\n')); err != nil {
			return nil, err
		}
		out["written"] = target
	}
	files, err := toolkit.ListFiles(root)
	if err != nil {
		return nil, err
	}
	out["workspace_files"] = files
	return out, nil
}

func writeTarget(v any) (string, error) {
	switch v := v.(type) {
	case nil, bool:
		if v == true {
			return "input.json", nil
		}
		return "", nil
	case string:
		return toolkit.CleanRel(v)
	default:
		return "", toolkit.BadInput("write_input must be a boolean or a workspace path")
	}
}
