// Package engine holds the agentctl verbs that talk to Temporal or run the
// engine (run, inspect, list, cancel, resume, approve, logs, tool, schedule,
// worker, dev): everything that links the Temporal SDK or the Docker
// client. The lean agentctl (cmd/agentctl-lean) does not import it, so
// validate and graph start without that package init; the full build
// (cmd/agentctl) passes Commands to cli.Run.
package engine

import "github.com/agentflow/agentflow/internal/cli"

// Commands returns the constructor of every engine verb, keyed like
// cli.EngineVerbs (which carries their short help).
func Commands() cli.Constructors {
	return cli.Constructors{
		"run":      newRunCmd,
		"inspect":  newInspectCmd,
		"list":     newListCmd,
		"cancel":   newCancelCmd,
		"resume":   newResumeCmd,
		"approve":  newApproveCmd,
		"logs":     newLogsCmd,
		"tool":     newToolCmd,
		"schedule": newScheduleCmd,
		"worker":   newWorkerCmd,
		"dev":      newDevCmd,
		"setup":    newSetupCmd,
		"gc":       newGCCmd,

		"codec-server": newCodecServerCmd,
	}
}

// The core's types and helpers under their old names, so the verbs read as
// they did inside package cli.
type (
	Options   = cli.Options
	Streams   = cli.Streams
	ExitError = cli.ExitError
)

const (
	ExitOK      = cli.ExitOK
	ExitFailure = cli.ExitFailure
	ExitInvalid = cli.ExitInvalid
)

var (
	usageErr      = cli.UsageErr
	argsUsage     = cli.ArgsUsage
	printProblems = cli.PrintProblems
	envOr         = cli.EnvOr
)
