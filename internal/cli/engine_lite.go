//go:build lite

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/spf13/cobra"
)

// engineBinary is the full build, installed next to the lean agentctl.
const engineBinary = "agentctl-engine"

// addEngineCommands adds one forwarding stub per engine verb, so help and
// the verb list stay complete in the lean build.
func addEngineCommands(root *cobra.Command, _ *Options) {
	for _, v := range engineVerbs {
		root.AddCommand(&cobra.Command{
			Use:                v.Name,
			Short:              v.Short,
			DisableFlagParsing: true,
			RunE: func(*cobra.Command, []string) error {
				return forwardToEngine(os.Args[1:])
			},
		})
	}
}

// forwardEarly hands shell completion of engine verbs to the engine, whose
// flags the stubs do not know.
func forwardEarly(args []string) (int, bool) {
	if len(args) >= 2 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd) &&
		slices.ContainsFunc(engineVerbs, func(v struct{ Name, Short string }) bool { return v.Name == args[1] }) {
		err := forwardToEngine(args)
		fmt.Fprintln(os.Stderr, "agentctl:", err)
		return ExitFailure, true
	}
	return 0, false
}

// forwardToEngine replaces this process with the engine binary: stdin,
// stdout, the terminal, signals and the exit code pass straight through.
func forwardToEngine(args []string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locate agentctl: %w", err)
	}
	engine := filepath.Join(filepath.Dir(self), engineBinary)
	if _, err := os.Stat(engine); err != nil {
		return fmt.Errorf("this verb needs %s next to agentctl (make build): %w", engineBinary, err)
	}
	return syscall.Exec(engine, append([]string{"agentctl"}, args...), os.Environ())
}
