package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO: placeholder until the engine lands; replace this file.
func newRunCmd(_ *Options) *cobra.Command {
	return &cobra.Command{
		Use:    "run",
		Short:  "(not built yet)",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("run: the engine is not built yet")
		},
	}
}
