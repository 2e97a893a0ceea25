// Command testtool misbehaves on purpose, one way per mode, so the sandbox,
// runner and engine can be tested against every failure a real tool shows:
// bad exit codes, bad JSON, floods, hangs, fork bombs, memory and disk
// exhaustion, escaping children, attempts to break out, and self-inspection
// of the sandbox it runs in. Never run the resource modes outside a sandbox.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

//go:embed VERSION
var version string

var tool = toolkit.Tool{
	Name:    "testtool",
	Version: version,
	Summary: "a tool that misbehaves on purpose (selected by \"mode\")",
	Usage: `Input: {"mode": MODE, ...}. Modes and their fields:
  ok                          echo the input
  exit        code=1 stderr="" stdout=""   exit with code, writing the texts as given
  badjson                     print non-JSON on stdout, exit 0
  multijson                   print two JSON objects, exit 0
  errorfield  message="" code=0            {"error": message}, exit code (0 by default)
  flaky       until=2         fail while AGENTFLOW_ATTEMPT < until, then succeed
  sleep       seconds=60 ignore_term=false sleep; SIGTERM ends it unless ignored
  flood       stdout_bytes=0 stderr_bytes=0 write that many bytes
  forkbomb    max=100000 hold_seconds=5    spawn sleepers until fork fails
  memhog      mib=64          allocate and touch mib MiB
  diskfill    max_mib=0 remove=false       write /workspace/fill.bin until ENOSPC
  background  seconds=300     leave a child holding stdout open, exit at once
  escape      target=""       try writes outside /workspace and a TCP dial
  selfinspect                 report uid/gid, capabilities, interfaces, mounts, cwd, env names
  bigoutput   bytes=1048576   return an output object of about that size
  echoenv     name=X | names=[...]        return env values (to prove secrets arrive)
  clock                       return when the input had been read: {"read_at_unix_nano": "<ns>"}
                              (benchmarks: the time from a step's start to its tool reading its input)
  sigterm     seconds=300     wait for SIGTERM, print a marker on stderr, exit 143
  trickle     lines=5 seconds=1 message="trickle" gate=""
                              write "<message> line i/N" to stderr, one per interval; with
                              gate (a workspace path), wait after line 1 until it exists
  net         probes=[{kind: dial|dns|connect|http, ...}]  network attempts, each reported
                              (dial addr; dns name; connect target proxy tls sni verify send_bytes;
                              http url method body_bytes header follow)`,
}

// input holds every mode's fields; json.Number keeps big values exact.
type input struct {
	Mode        string         `json:"mode"`
	Code        toolkit.Number `json:"code"`
	Stdout      string         `json:"stdout"`
	Stderr      string         `json:"stderr"`
	Message     string         `json:"message"`
	Until       toolkit.Number `json:"until"`
	Seconds     toolkit.Number `json:"seconds"`
	IgnoreTerm  bool           `json:"ignore_term"`
	StdoutBytes toolkit.Number `json:"stdout_bytes"`
	StderrBytes toolkit.Number `json:"stderr_bytes"`
	Max         toolkit.Number `json:"max"`
	HoldSeconds toolkit.Number `json:"hold_seconds"`
	MiB         toolkit.Number `json:"mib"`
	MaxMiB      toolkit.Number `json:"max_mib"`
	Remove      bool           `json:"remove"`
	Target      string         `json:"target"`
	Bytes       toolkit.Number `json:"bytes"`
	Name        string         `json:"name"`
	Names       []string       `json:"names"`
	Lines       toolkit.Number `json:"lines"`
	Gate        string         `json:"gate"`
	Probes      []probe        `json:"probes"`

	raw map[string]any
}

type mode func(ctx context.Context, env toolkit.Env, in input) (any, error)

var modes = map[string]mode{
	"ok":          modeOK,
	"exit":        modeExit,
	"badjson":     modeBadJSON,
	"multijson":   modeMultiJSON,
	"errorfield":  modeErrorField,
	"flaky":       modeFlaky,
	"sleep":       modeSleep,
	"flood":       modeFlood,
	"forkbomb":    modeForkBomb,
	"memhog":      modeMemHog,
	"diskfill":    modeDiskFill,
	"background":  modeBackground,
	"escape":      modeEscape,
	"selfinspect": modeSelfInspect,
	"bigoutput":   modeBigOutput,
	"echoenv":     modeEchoEnv,
	"sigterm":     modeSigterm,
	"trickle":     modeTrickle,
	"net":         modeNet,
	"clock":       modeClock,
}

func main() {
	if len(osArgs()) > 1 && osArgs()[1] == childFlag {
		runChild()
		return
	}
	toolkit.Main(tool, handle)
}

func handle(ctx context.Context, env toolkit.Env, raw map[string]any) (any, error) {
	var in input
	data, _ := json.Marshal(raw)
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, toolkit.BadInput("%v", err)
	}
	in.raw = raw
	m, ok := modes[in.Mode]
	if !ok {
		return nil, toolkit.BadInput("unknown mode %q (one of %s)", in.Mode, strings.Join(modeNames(), ", "))
	}
	env.Log.Info("mode", "mode", in.Mode)
	return m(ctx, env, in)
}

func modeNames() []string {
	names := make([]string, 0, len(modes))
	for n := range modes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// modeClock reports the wall clock just after the input was read and
// decoded; the sandbox shares the host's clock.
func modeClock(context.Context, toolkit.Env, input) (any, error) {
	return map[string]any{"read_at_unix_nano": strconv.FormatInt(time.Now().UnixNano(), 10)}, nil
}

func modeOK(_ context.Context, _ toolkit.Env, in input) (any, error) {
	if in.raw == nil {
		return map[string]any{}, nil
	}
	return in.raw, nil
}

func modeExit(_ context.Context, env toolkit.Env, in input) (any, error) {
	fmt.Fprint(env.Stdout, in.Stdout)
	fmt.Fprint(env.Stderr, in.Stderr)
	code := in.Code.Int(1)
	return nil, &toolkit.ExitError{Code: code, Err: fmt.Errorf("exit %d on request", code), Silent: true}
}

func modeBadJSON(_ context.Context, env toolkit.Env, _ input) (any, error) {
	fmt.Fprintln(env.Stdout, "this is not JSON {\"half\": ")
	return toolkit.Written{}, nil
}

func modeMultiJSON(_ context.Context, env toolkit.Env, _ input) (any, error) {
	fmt.Fprintln(env.Stdout, `{"first":1}`)
	fmt.Fprintln(env.Stdout, `{"second":2}`)
	return toolkit.Written{}, nil
}

func modeErrorField(_ context.Context, env toolkit.Env, in input) (any, error) {
	msg := in.Message
	if msg == "" {
		msg = "tool reported an error"
	}
	data, _ := json.Marshal(map[string]string{"error": msg})
	fmt.Fprintf(env.Stdout, "%s\n", data)
	if code := in.Code.Int(0); code != 0 {
		return nil, &toolkit.ExitError{Code: code, Err: fmt.Errorf("%s", msg), Silent: true}
	}
	return toolkit.Written{}, nil
}

// FlakyOutcome is the pure rule of the flaky mode.
func FlakyOutcome(attempt, until int) error {
	if attempt < until {
		return fmt.Errorf("flaky: attempt %d fails (succeeds from attempt %d)", attempt, until)
	}
	return nil
}

func modeFlaky(_ context.Context, env toolkit.Env, in input) (any, error) {
	until := in.Until.Int(2)
	if err := FlakyOutcome(env.Attempt, until); err != nil {
		return nil, err
	}
	return map[string]any{"attempt": env.Attempt, "until": until}, nil
}

// BigOutput builds an object whose JSON encoding is about n bytes.
func BigOutput(n int) map[string]any {
	const overhead = len(`{"data":"","bytes":}`) + 12
	return map[string]any{"data": strings.Repeat("x", max(0, n-overhead)), "bytes": n}
}

func modeBigOutput(_ context.Context, _ toolkit.Env, in input) (any, error) {
	n := in.Bytes.Int(1 << 20)
	if n < 0 || n > 1<<30 {
		return nil, toolkit.BadInput("bytes must be between 0 and 1 GiB")
	}
	return BigOutput(n), nil
}

func modeEchoEnv(_ context.Context, env toolkit.Env, in input) (any, error) {
	names := in.Names
	if in.Name != "" {
		names = append([]string{in.Name}, names...)
	}
	if len(names) == 0 {
		return nil, toolkit.BadInput("name or names is required")
	}
	values := map[string]any{}
	for _, n := range names {
		if v, ok := lookupEnv(n); ok {
			values[n] = v
		} else {
			values[n] = nil
		}
	}
	out := map[string]any{"values": values}
	if in.Name != "" {
		out["name"] = in.Name
		out["value"] = values[in.Name]
		out["present"] = values[in.Name] != nil
	}
	return out, nil
}
