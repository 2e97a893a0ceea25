// Command agentctl-lean (installed as bin/agentctl) answers validate, graph
// and completion itself and links no Temporal or Docker code, so it starts
// in a few milliseconds; every engine verb is handed by exec to
// agentctl-engine (cmd/agentctl) installed next to it.
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
	}, nil)
	stop()
	os.Exit(code)
}
