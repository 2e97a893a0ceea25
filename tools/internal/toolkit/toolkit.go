// Package toolkit is the shared skeleton of agentflow's example tools: the
// /bin/tool protocol of SPEC §8 in one place, so each tool is only its logic.
//
// The protocol: a JSON object on stdin, exactly one JSON object on stdout
// (the step's output), logs on stderr, an "error" field plus a non-zero exit
// for failures, --help and --version (which prints exactly the version).
package toolkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// Exit codes. A tool failure is exit 1 with {"error": ...}; bad input (the
// caller's fault, retrying cannot help) is exit 2, also with an error field.
const (
	ExitOK        = 0
	ExitFailure   = 1
	ExitBadInput  = 2
	maxInputBytes = 64 << 20
	defaultWSRoot = "/workspace"
	envAttempt    = "AGENTFLOW_ATTEMPT"
	envStepID     = "AGENTFLOW_STEP_ID"
	envWorkspace  = "AGENTFLOW_WORKSPACE"
)

// Tool describes one tool binary.
type Tool struct {
	Name    string // e.g. "rss-fetcher"
	Version string // printed verbatim by --version; surrounding space is trimmed
	Summary string // one line for --help
	Usage   string // input and output fields, for --help
}

// IO is the process boundary, injectable for tests.
type IO struct {
	Args   []string // without the program name
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// OSIO is the real process boundary.
func OSIO() IO {
	return IO{Args: os.Args[1:], Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

// Env is what a tool learns about its invocation besides its input.
type Env struct {
	Attempt   int    // AGENTFLOW_ATTEMPT (1-based); 0 when unset
	StepID    string // AGENTFLOW_STEP_ID; empty when unset
	Workspace string // /workspace, or AGENTFLOW_WORKSPACE for local runs
	Log       *slog.Logger
	Stderr    io.Writer // raw stderr, for tools that must write unstructured text
	Stdout    io.Writer // raw stdout: only for tools that break the protocol on purpose
	Getenv    func(string) string
}

// InputError marks a failure caused by the input; Run exits ExitBadInput.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return "invalid input: " + e.Msg }

// BadInput builds an *InputError.
func BadInput(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// ExitError lets a tool choose its exit code. Unless Silent, the error field
// is still written; Silent leaves stdout as the handler left it (the test tool
// uses it to misbehave precisely).
type ExitError struct {
	Code   int
	Err    error
	Silent bool
}

// Written is returned as the output by a handler that wrote stdout itself
// (only tools that break the protocol on purpose do that); Run adds nothing.
type Written struct{}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Handler is a tool's logic: typed input in, a JSON object (struct or map) out.
type Handler[In any] func(ctx context.Context, env Env, in In) (any, error)

// Main runs the tool against the real process and exits with its code.
func Main[In any](t Tool, h Handler[In]) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := Run(ctx, t, OSIO(), h)
	stop()
	os.Exit(code)
}

// Run executes the protocol once and returns the exit code.
func Run[In any](ctx context.Context, t Tool, pio IO, h Handler[In]) int {
	if pio.Getenv == nil {
		pio.Getenv = func(string) string { return "" }
	}
	if code, done := handleFlags(t, pio); done {
		return code
	}
	env := newEnv(t, pio)
	var in In
	if err := DecodeInput(pio.Stdin, &in); err != nil {
		return Fail(pio.Stdout, env.Log, err)
	}
	out, err := h(ctx, env, in)
	if err != nil {
		return Fail(pio.Stdout, env.Log, err)
	}
	if _, ok := out.(Written); ok {
		return ExitOK
	}
	if err := WriteOutput(pio.Stdout, out); err != nil {
		return Fail(pio.Stdout, env.Log, err)
	}
	return ExitOK
}

func handleFlags(t Tool, pio IO) (int, bool) {
	if len(pio.Args) == 0 {
		return 0, false
	}
	switch pio.Args[0] {
	case "--version", "-version", "version":
		fmt.Fprintln(pio.Stdout, strings.TrimSpace(t.Version))
		return ExitOK, true
	case "--help", "-help", "-h", "help":
		fmt.Fprint(pio.Stdout, HelpText(t))
		return ExitOK, true
	default:
		fmt.Fprintf(pio.Stderr, "%s: unknown argument %q (input is a JSON object on stdin)\n\n%s", t.Name, pio.Args[0], HelpText(t))
		return ExitBadInput, true
	}
}

// HelpText is what --help prints.
func HelpText(t Tool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s — %s\n\n", t.Name, strings.TrimSpace(t.Version), t.Summary)
	b.WriteString("Usage: echo '{...}' | /bin/tool\n       /bin/tool --help | --version\n\n")
	b.WriteString("Reads one JSON object on stdin, writes one JSON object on stdout, logs on stderr.\n")
	b.WriteString("Failures print {\"error\": \"...\"} and exit non-zero (2 = bad input).\n")
	if u := strings.TrimSpace(t.Usage); u != "" {
		b.WriteString("\n" + u + "\n")
	}
	return b.String()
}

func newEnv(t Tool, pio IO) Env {
	attempt, _ := strconv.Atoi(pio.Getenv(envAttempt))
	ws := pio.Getenv(envWorkspace)
	if ws == "" {
		ws = defaultWSRoot
	}
	log := slog.New(slog.NewTextHandler(pio.Stderr, nil)).With("tool", t.Name)
	if step := pio.Getenv(envStepID); step != "" {
		log = log.With("step_id", step)
	}
	if attempt > 0 {
		log = log.With("attempt", attempt)
	}
	return Env{Attempt: attempt, StepID: pio.Getenv(envStepID), Workspace: ws, Log: log, Stderr: pio.Stderr, Stdout: pio.Stdout, Getenv: pio.Getenv}
}

// DecodeInput reads one JSON object from r into v. Empty input counts as {}.
// Anything after the object other than whitespace is an error.
func DecodeInput(r io.Reader, v any) error {
	if r == nil {
		r = strings.NewReader("")
	}
	data, err := io.ReadAll(io.LimitReader(r, maxInputBytes+1))
	if err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	if len(data) > maxInputBytes {
		return BadInput("stdin exceeds %d bytes", maxInputBytes)
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		data = []byte("{}")
	}
	if data[0] != '{' {
		return BadInput("stdin must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return BadInput("decode stdin: %v", err)
	}
	if dec.More() {
		return BadInput("stdin holds more than one JSON value")
	}
	return nil
}

// WriteOutput writes v as exactly one JSON object and a newline. It encodes
// to a buffer first so a marshalling error never leaves half an object.
func WriteOutput(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	if len(data) == 0 || data[0] != '{' {
		return fmt.Errorf("encode output: tool produced %s, not a JSON object", kindOf(data))
	}
	data = append(data, '\n')
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("write stdout: %w", err)
	}
	return nil
}

func kindOf(data []byte) string {
	if len(data) == 0 {
		return "nothing"
	}
	switch data[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	default:
		return "a scalar"
	}
}

// Fail writes {"error": msg} to stdout, logs it, and returns the exit code
// the error calls for.
func Fail(stdout io.Writer, log *slog.Logger, err error) int {
	code := ExitFailure
	var ie *InputError
	var ee *ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.Code
	case errors.As(err, &ie):
		code = ExitBadInput
	}
	if log != nil {
		log.Error("tool failed", "err", err.Error())
	}
	if ee != nil && ee.Silent {
		return code
	}
	data, _ := json.Marshal(map[string]string{"error": err.Error()})
	fmt.Fprintf(stdout, "%s\n", data)
	return code
}
