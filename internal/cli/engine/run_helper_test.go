package engine

import (
	"context"

	"github.com/agentflow/agentflow/internal/cli"
)

// Run executes agentctl in-process with the engine verbs, as the full
// binary does.
func Run(ctx context.Context, version string, args []string, s Streams) int {
	return cli.Run(ctx, version, args, s, Commands())
}
