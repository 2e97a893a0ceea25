// Command agentctl (installed as bin/agentctl-engine) is the full build:
// every verb, including those that talk to Temporal and run the worker.
// The lean bin/agentctl (cmd/agentctl-lean) execs it for engine verbs.
package main

import (
	"github.com/agentflow/agentflow/internal/cli"
	"github.com/agentflow/agentflow/internal/cli/engine"
)

// version is set by the Makefile (-ldflags "-X main.version=...").
var version = "dev"

func main() { cli.Main(version, engine.Commands()) }
