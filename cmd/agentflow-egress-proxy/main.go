// Command agentflow-egress-proxy is the egress proxy of one sandbox. The
// sandbox host starts it in its own container and writes one
// wire.Config JSON object to its stdin; it then serves until the config's
// deadline, writing one wire.Record per line to stdout (smokescreen's own
// log goes to stderr). See internal/egressproxy and docs/security/egress.md.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/agentflow/agentflow/internal/egressproxy"
	"github.com/agentflow/agentflow/internal/egressproxy/wire"
)

// maxConfig bounds the configuration read from stdin.
const maxConfig = 4 << 20

func main() {
	os.Exit(run())
}

func run() int {
	fatal := func(err error) int {
		_ = json.NewEncoder(os.Stdout).Encode(wire.Record{Type: "fatal", Time: time.Now().UTC(), Reason: err.Error()})
		fmt.Fprintln(os.Stderr, "agentflow-egress-proxy:", err)
		return 1
	}
	var cfg wire.Config
	dec := json.NewDecoder(io.LimitReader(os.Stdin, maxConfig))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return fatal(fmt.Errorf("read config from stdin: %w", err))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := egressproxy.Run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		return fatal(err)
	}
	return 0
}
