package engine

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/registry"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/workflows"
)

// submitFlags are what `run` and `schedule create` share: the spec, its
// inputs, and the task queue whose workers (and tool registry) serve it.
type submitFlags struct {
	File      string
	Inputs    []string
	InputFile string
	TaskQueue string
}

func (s *submitFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&s.File, "file", "f", "", "spec file")
	f.StringArrayVar(&s.Inputs, "input", nil, "run input name=value (repeatable; JSON for non-string inputs)")
	f.StringVar(&s.InputFile, "input-file", "", "JSON object of run inputs (--input wins)")
	f.StringVar(&s.TaskQueue, "task-queue", workflows.TaskQueue, "task queue of the workers")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	_ = cmd.MarkFlagFilename("input-file", "json")
}

// loadSpec parses, validates and compiles the spec; an invalid spec prints
// its problems and exits 2.
func (s *submitFlags) loadSpec(errw io.Writer) (*spec.Plan, error) {
	plan, err := spec.LoadFile(s.File)
	if err != nil {
		printProblems(errw, err)
		return nil, &ExitError{Code: ExitInvalid, Silent: true}
	}
	return plan, nil
}

// inputs types --input and --input-file against the plan's declarations.
func (s *submitFlags) inputs(plan *spec.Plan) (map[string]any, error) {
	return parseInputs(plan, s.InputFile, s.Inputs)
}

// resolve pins every `tool: name:version` of the plan to its registered
// digest (an empty map when the plan names no tools).
func (s *submitFlags) resolve(ctx context.Context, c client.Client, plan *spec.Plan) (map[string]string, error) {
	refs := toolRefs(plan)
	if len(refs) == 0 {
		return map[string]string{}, nil
	}
	return resolveTools(ctx, &registry.Client{Temporal: c, TaskQueue: s.TaskQueue}, plan, refs)
}
