package cli

import "github.com/spf13/cobra"

// addEngineCommands adds the verbs that talk to Temporal or run the engine.
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
	)
}
