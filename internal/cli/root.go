// Package cli implements agentctl: one file per verb, no flag globals, all
// output through injected writers, errors mapped to the exit codes of
// SPEC §6 (0 ok, 1 agent FAILED/CANCELED or server error, 2 invalid input).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentflow/agentflow/internal/temporalconn"
)

// Exit codes (SPEC §6).
const (
	ExitOK      = 0
	ExitFailure = 1 // the agent ended FAILED/CANCELED, or the server failed
	ExitInvalid = 2 // invalid input: usage, invalid spec
)

// Streams are the command's standard streams. Commands never touch
// os.Stdout/os.Stderr directly, so tests can capture everything.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
	// IsTerminal reports whether Out is a terminal (live progress views).
	IsTerminal bool
}

// Options are the global flags shared by every verb.
type Options struct {
	// Address, Namespace and Security (TLS, mutual TLS, API key, gRPC
	// headers) are the connection to Temporal as resolved before the verb
	// runs: flags, the Temporal CLI's TEMPORAL_* variables, a config-file
	// profile, defaults (conn.go).
	Address   string
	Namespace string
	Security  temporalconn.Security
	Output    string // table|json
	// CodecKeyFile: the payload codec's key ring (--codec-key-file,
	// AGENTFLOW_CODEC_KEY_FILE); "" = payloads in clear. A path, not a
	// codec: the lean build must not link Temporal.
	CodecKeyFile string
	Streams      Streams
}

// ExitError carries an exit code up to main. Err has already been printed
// when Silent is set.
type ExitError struct {
	Code   int
	Err    error
	Silent bool
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// UsageErr marks invalid invocations (exit 2).
func UsageErr(format string, a ...any) error {
	return &ExitError{Code: ExitInvalid, Err: fmt.Errorf(format, a...)}
}

// NewRootCmd builds the agentctl command tree. engine holds the
// constructors of the engine verbs (the full build, internal/cli/engine);
// with nil engine, as in the lean build, each engine verb is a stub that
// hands the invocation to agentctl-engine by exec. Either way every verb's
// short help comes from the one verb table (verbs.go).
func NewRootCmd(version string, s Streams, engine Constructors) *cobra.Command {
	opts := &Options{Streams: s}
	var conn connFlags
	root := &cobra.Command{
		Use:   "agentctl",
		Short: "Durable, sandboxed AI-agent workflows on Temporal and Docker",
		Long: `Durable, sandboxed AI-agent workflows on Temporal and Docker.

Connection settings (address, namespace, TLS, API key) come from the flags,
else the Temporal CLI's TEMPORAL_* variables, else a profile of the Temporal
config file (--profile, --config-file; the file the temporal CLI and SDKs
share), else the defaults.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Unknown verbs are usage errors (exit 2), not failures.
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return UsageErr("unknown command %q (see agentctl --help)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.DisableFlagParsing {
				// A lean build's forwarding stub: its flags are unparsed;
				// the engine it hands over to checks everything.
				return nil
			}
			switch opts.Output {
			case "table", "json":
			default:
				return UsageErr("invalid --output %q: want table or json", opts.Output)
			}
			// The connection is resolved when a verb runs, not while
			// --help is printed, so a bad variable or profile does not
			// hide the help.
			return conn.resolve(cmd, opts)
		},
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &ExitError{Code: ExitInvalid, Err: err}
	})

	pf := root.PersistentFlags()
	conn.register(pf)
	pf.StringVarP(&opts.Output, "output", "o", "table", "output format: table|json")
	pf.StringVar(&opts.CodecKeyFile, "codec-key-file", EnvOr("AGENTFLOW_CODEC_KEY_FILE", ""),
		`encrypt every Temporal payload (inputs, outputs, errors) with the AES-256 keys of this file, "<key-id> <base64 32 bytes>" a line, the first encrypting (mode 0600; env AGENTFLOW_CODEC_KEY_FILE); clients and workers need the same keys`)

	root.AddCommand(
		newValidateCmd(opts),
		newGraphCmd(opts),
	)
	addEngineCommands(root, opts, engine)
	return root
}

// Run executes agentctl with args and returns the process exit code; engine
// is as for NewRootCmd.
func Run(ctx context.Context, version string, args []string, s Streams, engine Constructors) int {
	if engine == nil {
		if code, done := forwardCompletion(args, s.Err); done {
			return code
		}
	}
	root := NewRootCmd(version, s, engine)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if !ee.Silent && ee.Err != nil {
			fmt.Fprintln(s.Err, "agentctl:", ee.Err)
		}
		return ee.Code
	}
	fmt.Fprintln(s.Err, "agentctl:", err)
	return ExitFailure
}

// ArgsUsage wraps a cobra positional-args validator so that its errors are
// usage errors (exit 2).
func ArgsUsage(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return &ExitError{Code: ExitInvalid, Err: err}
		}
		return nil
	}
}

// EnvOr returns the environment variable key, or def when it is unset or empty.
func EnvOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

// Main is both binaries' main: Run on the process's arguments and standard
// streams, canceled by SIGINT/SIGTERM, then exit with Run's code. engine is
// nil in the lean build (engine verbs are forwarded to agentctl-engine).
func Main(version string, engine Constructors) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, version, os.Args[1:], Streams{
		In:         os.Stdin,
		Out:        os.Stdout,
		Err:        os.Stderr,
		IsTerminal: IsTerminal(os.Stdout),
	}, engine)
	stop()
	os.Exit(code)
}
