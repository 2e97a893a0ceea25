// Package devserver starts and stops the Temporal CLI's development server
// (`temporal server start-dev`) as a child process: what `agentctl dev`
// and the end-to-end tests run. The server keeps its state in a SQLite file
// and registers agentflow's search attributes at start.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/agentflow/agentflow/workflows"
)

// DynamicConfig is passed to every dev server (scripts/dev.sh and
// docker-compose.yml pass the same): eager activity execution, and the
// matcher that honours task queue priorities (DECISIONS 147).
var DynamicConfig = []string{"system.enableActivityEagerExecution=true", "matching.useNewMatcher=true"}

// Options configure Start.
type Options struct {
	// Bin is the temporal CLI; "" → FindBinary("").
	Bin string
	// IP to bind (default 127.0.0.1), Port of the frontend (default 7233),
	// UIPort of the Web UI (default Port+1000).
	IP     string
	Port   int
	UIPort int
	// Headless disables the Web UI.
	Headless bool
	// UICodecEndpoint, if set, is the remote codec endpoint the Web UI
	// decodes payloads with (`agentctl codec-server`); the browser calls
	// it directly, so it must be reachable from where the UI is viewed.
	UICodecEndpoint string
	// DBFile persists state (SQLite); "" keeps everything in memory.
	DBFile string
	// NoSearchAttributes starts the server without agentflow's search
	// attributes, like a cluster nobody has set up (`agentctl setup` tests).
	NoSearchAttributes bool
	// LogLevel of the server (default "warn").
	LogLevel string
	// Stdout and Stderr receive the server's output (default: discarded).
	Stdout, Stderr io.Writer
	// ReadyTimeout bounds the wait until the frontend answers (default 90 s).
	ReadyTimeout time.Duration
}

// Server is a running dev server.
type Server struct {
	Address string // host:port of the frontend
	UIURL   string // "" when headless
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	tail    *tailBuffer // the end of the server's output
}

// FindBinary returns bin when set, else ./bin/temporal when it exists,
// else temporal from PATH.
func FindBinary(bin string) (string, error) {
	if bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("temporal binary %s: %w", bin, err)
		}
		return bin, nil
	}
	local := filepath.Join("bin", "temporal")
	if st, err := os.Stat(local); err == nil && !st.IsDir() {
		return local, nil
	}
	p, err := exec.LookPath("temporal")
	if err != nil {
		return "", errors.New("temporal CLI not found: build it with `make temporal` (./bin/temporal) or pass --temporal-bin")
	}
	return p, nil
}

// Args builds the start-dev command line (exported for tests and docs).
func Args(o Options) []string {
	args := []string{"server", "start-dev",
		"--ip", o.IP,
		"--port", strconv.Itoa(o.Port),
		"--log-level", o.LogLevel,
	}
	if o.Headless {
		args = append(args, "--headless")
	} else {
		args = append(args, "--ui-port", strconv.Itoa(o.UIPort))
		if o.UICodecEndpoint != "" {
			args = append(args, "--ui-codec-endpoint", o.UICodecEndpoint)
		}
	}
	if o.DBFile != "" {
		args = append(args, "--db-filename", o.DBFile)
	}
	if !o.NoSearchAttributes {
		for _, sa := range workflows.SearchAttributes {
			args = append(args, "--search-attribute", sa+"=Keyword")
		}
	}
	for _, dc := range DynamicConfig {
		args = append(args, "--dynamic-config-value", dc)
	}
	return args
}

func (o *Options) setDefaults() {
	if o.IP == "" {
		o.IP = "127.0.0.1"
	}
	if o.Port == 0 {
		o.Port = 7233
	}
	if o.UIPort == 0 {
		o.UIPort = o.Port + 1000
	}
	if o.LogLevel == "" {
		o.LogLevel = "warn"
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 90 * time.Second
	}
}

// Start launches the server and waits until its frontend answers a health
// check. ctx bounds only the start; Stop ends the server.
//
// The server picks free ports of its own (history, matching, membership,
// HTTP) and another process can take one before it binds it: a start that
// ends with "address already in use" is tried again, up to startTries
// times. A start that fails otherwise is not; its error ends with the last
// lines the server wrote.
func Start(ctx context.Context, o Options) (*Server, error) {
	o.setDefaults()
	if o.Headless && o.UICodecEndpoint != "" {
		return nil, errors.New("a UI codec endpoint needs the Web UI: not headless")
	}
	bin, err := FindBinary(o.Bin)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(o.IP, strconv.Itoa(o.Port))
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("port %d on %s is already in use (another Temporal server?)", o.Port, o.IP)
	}
	if o.DBFile != "" {
		if err := os.MkdirAll(filepath.Dir(o.DBFile), 0o750); err != nil {
			return nil, fmt.Errorf("create directory for %s: %w", o.DBFile, err)
		}
	}
	for try := 1; ; try++ {
		s, err := start(ctx, bin, addr, o)
		var exited *exitedError
		if err == nil || !errors.As(err, &exited) || !exited.portTaken() || try == startTries || ctx.Err() != nil {
			return s, err
		}
		slog.Warn("temporal dev server lost a port race at start; starting it again", "try", try, "error", err)
	}
}

// startTries bounds the starts of one Start (port races only).
const startTries = 3

func start(ctx context.Context, bin, addr string, o Options) (*Server, error) {
	tail := &tailBuffer{max: 4 << 10}
	// Not exec.CommandContext: the server must outlive the start context
	// and be stopped gracefully by Stop, not killed.
	cmd := exec.Command(bin, Args(o)...)
	cmd.Stdout = teeTo(o.Stdout, tail)
	cmd.Stderr = teeTo(o.Stderr, tail)
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &Server{Address: addr, cmd: cmd, done: make(chan struct{}), tail: tail}
	if !o.Headless {
		s.UIURL = fmt.Sprintf("http://%s:%d", o.IP, o.UIPort)
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(ctx, o.ReadyTimeout); err != nil {
		_ = s.Stop(10 * time.Second)
		return nil, err
	}
	return s, nil
}

// exitedError: the server process ended before its frontend answered.
type exitedError struct {
	err    error  // the process's exit
	output string // the end of what it wrote
}

func (e *exitedError) Error() string {
	msg := fmt.Sprintf("temporal dev server exited during start: %v", e.err)
	if e.output != "" {
		msg += "; its last output:\n" + e.output
	}
	return msg
}

func (e *exitedError) Unwrap() error { return e.err }

// portTaken: the server could not bind a port it had chosen.
func (e *exitedError) portTaken() bool {
	return strings.Contains(e.output, "address already in use")
}

func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	for {
		select {
		case <-s.done:
			return &exitedError{err: s.waitErr, output: strings.TrimSpace(s.tail.String())}
		case <-ctx.Done():
			return fmt.Errorf("temporal dev server at %s not ready: %w (last error: %v)", s.Address, ctx.Err(), lastErr)
		default:
		}
		lastErr = Ping(ctx, s.Address)
		if lastErr == nil {
			return nil
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-s.done:
		case <-ctx.Done():
		}
	}
}

// Ping dials the frontend and runs a health check.
func Ping(ctx context.Context, address string) error {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, client.Options{HostPort: address, Logger: tlog.NewStructuredLogger(discard())})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.CheckHealth(dctx, &client.CheckHealthRequest{})
	return err
}

// Done is closed when the server process exits.
func (s *Server) Done() <-chan struct{} { return s.done }

// Pid is the server process's ID (for its CPU time in benchmarks).
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Err is the process's exit error, valid after Done.
func (s *Server) Err() error { return s.waitErr }

// Stop asks the server to shut down (SIGTERM), and kills it after grace.
func (s *Server) Stop(grace time.Duration) error {
	select {
	case <-s.done:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return nil
	case <-time.After(grace):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("temporal dev server did not stop within %s; killed", grace)
	}
}
