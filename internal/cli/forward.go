package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// EngineBinary is the full build, installed next to the lean agentctl.
const EngineBinary = "agentctl-engine"

// forwardingStub stands in for an engine verb in the lean build: it takes
// every argument as is (the engine parses the flags) and execs the engine.
func forwardingStub(name string) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return forwardToEngine(os.Args[1:])
		},
	}
}

// forwardCompletion hands shell completion of engine verbs to the engine,
// whose flags the stubs do not know.
func forwardCompletion(args []string, errw io.Writer) (int, bool) {
	if len(args) >= 2 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd) && isEngineVerb(args[1]) {
		err := forwardToEngine(args)
		fmt.Fprintln(errw, "agentctl:", err)
		return ExitFailure, true
	}
	return 0, false
}

// forwardToEngine replaces this process with the engine binary: stdin,
// stdout, the terminal, signals and the exit code pass straight through.
// It returns only when the engine cannot be started.
func forwardToEngine(args []string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locate agentctl: %w", err)
	}
	engine := filepath.Join(filepath.Dir(self), EngineBinary)
	if _, err := os.Stat(engine); err != nil {
		return fmt.Errorf("this verb needs %s next to agentctl (make build): %w", EngineBinary, err)
	}
	return syscall.Exec(engine, append([]string{"agentctl"}, args...), os.Environ())
}
