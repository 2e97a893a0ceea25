// Command wsfile writes and reads files in the workspace. Tests use it to
// prove workspace hand-off between steps: a step writes, a dependent step
// (restored from its checkpoint) reads, a join step sees every branch's files.
package main

import (
	"context"
	_ "embed"
	"errors"
	"io/fs"
	"sort"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

//go:embed VERSION
var version string

var tool = toolkit.Tool{
	Name:    "wsfile",
	Version: version,
	Summary: "write and read files in /workspace",
	Usage: `Input:  {"write": {"path": "content", ...}, "append": {"path": "content", ...}, "read": ["path", ...], "strict": false}
Output: {"written": [paths], "files": {"path": "content"}, "missing": [paths], "workspace_files": [paths]}
Writes happen first, then appends (a missing file is created), then reads.
With "strict": true a missing file is an error.`,
}

type input struct {
	Write map[string]string `json:"write"`
	// Append adds content to the end of a file: a step that runs twice
	// on the same workspace shows it twice (the chaos tests' detector of
	// a retry that did not start from the clean pre-attempt checkpoint).
	Append map[string]string `json:"append"`
	Read   []string          `json:"read"`
	Strict bool              `json:"strict"`
}

type output struct {
	Written        []string          `json:"written"`
	Files          map[string]string `json:"files"`
	Missing        []string          `json:"missing"`
	WorkspaceFiles []string          `json:"workspace_files"`
}

func main() { toolkit.Main(tool, handle) }

func handle(_ context.Context, env toolkit.Env, in input) (any, error) {
	root, err := env.OpenWorkspace()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	out := output{Written: []string{}, Files: map[string]string{}, Missing: []string{}}
	paths := make([]string, 0, len(in.Write))
	for p := range in.Write {
		paths = append(paths, p)
	}
	sort.Strings(paths) // deterministic order of effects and of the output
	for _, p := range paths {
		if err := toolkit.WriteFile(root, p, []byte(in.Write[p])); err != nil {
			return nil, err
		}
		c, _ := toolkit.CleanRel(p)
		out.Written = append(out.Written, c)
	}
	paths = paths[:0]
	for p := range in.Append {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		old, err := toolkit.ReadFile(root, p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if err := toolkit.WriteFile(root, p, append(old, in.Append[p]...)); err != nil {
			return nil, err
		}
		c, _ := toolkit.CleanRel(p)
		out.Written = append(out.Written, c)
	}
	for _, p := range in.Read {
		data, err := toolkit.ReadFile(root, p)
		switch {
		case errors.Is(err, fs.ErrNotExist) && !in.Strict:
			out.Missing = append(out.Missing, p)
		case err != nil:
			return nil, err
		default:
			out.Files[p] = string(data)
		}
	}
	if out.WorkspaceFiles, err = toolkit.ListFiles(root); err != nil {
		return nil, err
	}
	env.Log.Info("workspace files", "written", len(out.Written), "read", len(out.Files), "missing", len(out.Missing))
	return out, nil
}
