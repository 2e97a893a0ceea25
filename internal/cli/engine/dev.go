package engine

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentflow/agentflow/internal/cli"
	"github.com/agentflow/agentflow/internal/devserver"
	"github.com/agentflow/agentflow/internal/temporalconn"
	"github.com/agentflow/agentflow/worker"
)

type devFlags struct {
	worker      workerFlags
	TemporalBin string
	DBFile      string
	UIPort      int
	Headless    bool
	ServerLog   string
	// UICodecEndpoint: the Web UI decodes payloads here (codec-server).
	UICodecEndpoint string
}

func newDevCmd(opts *Options) *cobra.Command {
	var f devFlags
	cmd := &cobra.Command{
		Use: "dev",
		Long: `Start the Temporal CLI development server (SQLite state in .data/temporal.db,
Web UI on :8233, agentflow's search attributes registered) on the port of
--address, wait until it answers, then run a worker against it. Ctrl-C
stops the worker (waiting for running steps) and then the server. This is
what 'make up' runs in the background.`,
		Example: `  agentctl dev
  agentctl dev --address 127.0.0.1:7333 --ui-port 8333 --health-addr :8081 --metrics-addr :9091
  agentctl --codec-key-file codec.keys dev --ui-codec-endpoint http://127.0.0.1:8081`,
		Args: argsUsage(cobra.NoArgs),
		// The server is its own: no profile, and --address is where it
		// listens.
		Annotations: map[string]string{cli.AnnotationConnection: cli.ConnectionLocal},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDev(cmd.Context(), opts, &f)
		},
	}
	f.worker.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.TemporalBin, "temporal-bin", "", "temporal CLI binary (default ./bin/temporal, else from PATH)")
	fl.StringVar(&f.DBFile, "db-filename", ".data/temporal.db", "SQLite file of the dev server's state")
	fl.IntVar(&f.UIPort, "ui-port", 8233, "Web UI port")
	fl.BoolVar(&f.Headless, "headless", false, "no Web UI")
	fl.StringVar(&f.UICodecEndpoint, "ui-codec-endpoint", "",
		"URL of a codec server (agentctl codec-server) the Web UI decrypts payloads with; the browser calls it directly")
	fl.StringVar(&f.ServerLog, "server-log-level", "error", "log level of the Temporal server (debug|info|warn|error)")
	return cmd
}

func runDev(ctx context.Context, opts *Options, f *devFlags) error {
	cfg, err := f.worker.config(opts, opts.Streams.Err)
	if err != nil {
		return err
	}
	if f.UICodecEndpoint != "" {
		if f.Headless {
			return usageErr("--ui-codec-endpoint needs the Web UI: drop --headless")
		}
		if u, err := url.Parse(f.UICodecEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageErr("invalid --ui-codec-endpoint %q: want http(s)://host:port", f.UICodecEndpoint)
		}
	}
	host, portStr, err := net.SplitHostPort(opts.Address)
	if err != nil {
		return usageErr("invalid --address %q: %v", opts.Address, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return usageErr("invalid port in --address %q", opts.Address)
	}
	if host == "" || host == "localhost" {
		host = "127.0.0.1"
	}
	log := cfg.Logger
	srv, err := devserver.Start(ctx, devserver.Options{
		Bin:      f.TemporalBin,
		IP:       host,
		Port:     port,
		UIPort:   f.UIPort,
		Headless: f.Headless,
		DBFile:   f.DBFile,
		LogLevel: f.ServerLog,
		Stdout:   opts.Streams.Err,
		Stderr:   opts.Streams.Err,

		UICodecEndpoint: f.UICodecEndpoint,
	})
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("dev: %w", err)}
	}
	defer func() {
		log.Info("stopping Temporal dev server")
		if err := srv.Stop(15 * time.Second); err != nil {
			log.Warn("stop Temporal dev server", "error", err)
		}
	}()
	log.Info("Temporal dev server ready", "address", srv.Address, "ui", srv.UIURL, "db", f.DBFile)

	cfg.Address = srv.Address
	// The dev server is plaintext on loopback whatever TEMPORAL_TLS* say
	// for the clusters this shell otherwise talks to.
	cfg.Security = temporalconn.Security{}
	// The worker stops when ctx ends (Ctrl-C) or when the server dies.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-srv.Done():
			log.Error("Temporal dev server exited", "error", srv.Err())
			cancel()
		case <-wctx.Done():
		}
	}()
	if err := worker.Run(wctx, cfg); err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("dev: worker: %w", err)}
	}
	select {
	case <-srv.Done():
		if ctx.Err() == nil {
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("dev: Temporal dev server exited: %v", srv.Err())}
		}
	default:
	}
	return nil
}
