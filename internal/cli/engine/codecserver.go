package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentflow/agentflow/internal/cli"
	"github.com/agentflow/agentflow/internal/codecserver"
	"github.com/agentflow/agentflow/internal/payloadcodec"
)

type codecServerOptions struct {
	*Options
	Listen         string
	AuthTokenFile  string
	InsecureNoAuth bool
	UIOrigin       string
	LogLevel       string
	// onListen is called with the bound address (tests, with port 0).
	onListen func(addr string)
}

// DefaultCodecListen is where codec-server listens unless told otherwise.
const DefaultCodecListen = "127.0.0.1:8081"

func newCodecServerCmd(g *Options) *cobra.Command {
	o := &codecServerOptions{Options: g}
	cmd := &cobra.Command{
		Use: "codec-server",
		Long: `Serve Temporal's remote codec endpoint (POST /encode, POST /decode) with the
keys of --codec-key-file, so the Temporal Web UI (temporal server start-dev
--ui-codec-endpoint URL, or the UI's codec setting) and the temporal CLI
(--codec-endpoint URL --codec-auth "Bearer TOKEN") show decrypted payloads.

Anyone who can reach the endpoint can decrypt every payload. Requests need
"Authorization: Bearer <token>" from --auth-token-file; the Web UI cannot
send a static token (only its own login's access token), so for the UI run
it with --insecure-no-auth, which is allowed on a loopback address only:
the endpoint is then reachable from the operator's machine alone, and
browsers may call it only from --ui-origin.`,
		Example: `  agentctl --codec-key-file codec.keys codec-server --insecure-no-auth --ui-origin http://localhost:8233
  agentctl --codec-key-file codec.keys codec-server --listen 10.0.0.5:8081 --auth-token-file codec.token
  temporal workflow show -w ID --codec-endpoint http://10.0.0.5:8081 --codec-auth "Bearer $(cat codec.token)"`,
		Args: argsUsage(cobra.NoArgs),
		// It dials no Temporal: a bad profile must not stop it.
		Annotations: map[string]string{cli.AnnotationConnection: cli.ConnectionNone},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCodecServer(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Listen, "listen", DefaultCodecListen, "listen address (without --auth-token-file: loopback only)")
	fl.StringVar(&o.AuthTokenFile, "auth-token-file", "", `file with the bearer token requests must carry (mode 0600, one line, at least 16 characters)`)
	fl.BoolVar(&o.InsecureNoAuth, "insecure-no-auth", false, "serve without a token (for the Web UI, which cannot send one); loopback --listen only")
	fl.StringVar(&o.UIOrigin, "ui-origin", "http://localhost:8233", `the one browser origin (scheme://host[:port] of the Web UI) allowed to call the endpoint (CORS); "" allows none`)
	fl.StringVar(&o.LogLevel, "log-level", "info", "debug|info|warn|error")
	return cmd
}

func runCodecServer(ctx context.Context, o *codecServerOptions) error {
	if o.CodecKeyFile == "" {
		return usageErr("codec-server needs --codec-key-file (or AGENTFLOW_CODEC_KEY_FILE)")
	}
	switch {
	case o.AuthTokenFile == "" && !o.InsecureNoAuth:
		return usageErr("codec-server needs --auth-token-file, or --insecure-no-auth on a loopback --listen (for the Web UI)")
	case o.AuthTokenFile != "" && o.InsecureNoAuth:
		return usageErr("--auth-token-file and --insecure-no-auth exclude each other")
	}
	if err := codecserver.CheckListen(o.Listen, o.InsecureNoAuth); err != nil {
		return usageErr("%v", err)
	}
	if o.UIOrigin != "" {
		if err := codecserver.CheckOrigin(o.UIOrigin); err != nil {
			return usageErr("--ui-origin: %v", err)
		}
	}
	var token string
	if o.AuthTokenFile != "" {
		var err error
		if token, err = codecserver.ReadToken(o.AuthTokenFile); err != nil {
			return usageErr("%v", err)
		}
	}
	codec, err := loadCodec(o.Options)
	if err != nil {
		return err
	}
	log, err := newLogger(o.Streams.Err, o.LogLevel, "text")
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("codec-server: %w", err)}
	}
	srv := &http.Server{
		Handler: codecserver.Handler(codecserver.Options{
			Codec: codec, Token: token, UIOrigin: o.UIOrigin, Logger: log,
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      time.Minute,
	}
	log.Info("codec server listening", "address", ln.Addr().String(), "ui_origin", o.UIOrigin,
		"auth", token != "", "encrypting_key_id", codec.ActiveKeyID())
	if o.onListen != nil {
		o.onListen(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("codec-server: %w", err)}
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("codec-server: shutdown: %w", err)}
	}
	return nil
}

// loadCodec loads --codec-key-file; nil without one. A bad file is
// invalid input (exit 2).
func loadCodec(o *Options) (*payloadcodec.Codec, error) {
	if o.CodecKeyFile == "" {
		return nil, nil
	}
	c, err := payloadcodec.Load(o.CodecKeyFile)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return c, nil
}
