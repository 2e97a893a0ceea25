//go:build !lite

package cli

import "github.com/spf13/cobra"

// forwardEarly is the lean build's hook (engine_lite.go); the full build
// handles everything itself.
func forwardEarly([]string) (int, bool) { return 0, false }

// addEngineCommands adds the verbs that talk to Temporal or run the engine
// (listed, for the lean build, in verbs.go).
func addEngineCommands(root *cobra.Command, opts *Options) {
	root.AddCommand(
		newRunCmd(opts),
		newInspectCmd(opts),
		newListCmd(opts),
		newCancelCmd(opts),
		newResumeCmd(opts),
		newApproveCmd(opts),
		newLogsCmd(opts),
		newToolCmd(opts),
		newWorkerCmd(opts),
		newDevCmd(opts),
		newScheduleCmd(opts),
	)
}
