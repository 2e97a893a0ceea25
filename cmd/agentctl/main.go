// Command agentctl (installed as bin/agentctl-engine) is the full build:
// every verb, including those that talk to Temporal and run the worker.
// The lean bin/agentctl (cmd/agentctl-lean) execs it for engine verbs.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentflow/agentflow/internal/cli"
	"github.com/agentflow/agentflow/internal/cli/engine"
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
	}, engine.Commands())
	stop()
	os.Exit(code)
}
