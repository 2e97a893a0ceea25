// Command agentctl validates, submits and inspects agentflow workflows and
// runs the agentflow worker.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentflow/agentflow/internal/cli"
)

// version is set by the Makefile (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, version, os.Args[1:], cli.Streams{
		In:         os.Stdin,
		Out:        os.Stdout,
		Err:        os.Stderr,
		IsTerminal: cli.IsTerminal(os.Stdout),
	})
	stop()
	os.Exit(code)
}
