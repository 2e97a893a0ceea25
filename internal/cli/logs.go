package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO: placeholder until the engine lands; replace this file.
func newLogsCmd(_ *Options) *cobra.Command {
	return &cobra.Command{
		Use:    "logs",
		Short:  "(not built yet)",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("logs: the engine is not built yet")
		},
	}
}
