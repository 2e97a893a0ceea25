// Command agentctl-lean (installed as bin/agentctl) answers validate, graph
// and completion itself and links no Temporal or Docker code, so it starts
// in a few milliseconds; every engine verb is handed by exec to
// agentctl-engine (cmd/agentctl) installed next to it.
package main

import "github.com/agentflow/agentflow/internal/cli"

// version is set by the Makefile (-ldflags "-X main.version=...").
var version = "dev"

func main() { cli.Main(version, nil) }
