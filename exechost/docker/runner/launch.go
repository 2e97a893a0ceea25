package runner

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// A prepared launcher (Prepare) is a shell started ahead of its command, as
// the command's user, that waits on its stdin for one line and evaluates
// it. The line is written here, and only here (launchLine): it prints
// launchMarker and execs env, which sets the command's environment and
// execs the command; the command then has the rest of the exec's stdin,
// its stdout and its stderr. The warm pool starts one in every pooled
// sandbox, so a step's tool starts with a write to a connection already
// open instead of an exec the daemon and runc set up while the step waits
// (docs/DECISIONS.md 250).
//
// What the line holds is the worker's, never the spec's: every value in it
// is single-quoted (shellQuote), names are shell identifiers, and a command
// the line cannot carry exactly runs the usual way (ErrNotLaunchable). The
// command gets the environment a plain exec with cmd.Env would give it:
// the variables a shell adds to what it exports (shellVars) are unset again
// and, where the container's own configuration has them, set back to that.

// launcherScript reads the files it is given (PrepareOptions.Warm: its
// arguments, never evaluated) and finds env by absolute path (envPaths),
// both while the sandbox is fresh; then it reads exactly one line (the read
// builtin takes its input a byte at a time from a pipe, so nothing past
// the newline is consumed) and evaluates it. nl lets a quoted value carry a
// newline on a single line. Without a whole line (the connection closed)
// it exits 125 having run nothing. What the line runs is never looked up
// through PATH: by then an earlier step's checkpoint may have filled the
// workspace, and an image's PATH may name a directory in it.
const launcherScript = "for f; do cat -- \"$f\" >/dev/null 2>&1; done; " +
	"e=; for c in " + envPaths + "; do if [ -x \"$c\" ]; then e=$c; break; fi; done; " +
	"nl='\n'; IFS= read -r l || exit 125; eval \"$l\""

// envPaths are where the launcher looks for env (coreutils, busybox).
const envPaths = "/usr/bin/env /bin/env"

// launcherArgv is followed by the files to warm ($0 is "launcher").
var launcherArgv = []string{"/bin/sh", "-c", launcherScript, "launcher"}

// shellVars are the variables sh, dash, bash or busybox ash put into the
// environment they pass on, which a plain exec does not have, and those
// launcherScript sets (an exported one of the same name would pass on the
// script's value: l is the whole line).
var shellVars = []string{"PWD", "OLDPWD", "SHLVL", "_", "f", "c", "e", "nl", "l"}

// launchMarker is printed on stdout once the line is read, just before the
// exec: the runner strips it, and an exit without it means the command
// never started (errNotLaunched).
const launchMarker = '\x06'

// maxLaunchLine bounds the line: the launcher reads it a byte per system
// call, so a huge environment goes through a plain exec instead.
const maxLaunchLine = 64 << 10

// ErrNotLaunchable: the command cannot be carried by a launcher line
// exactly (an environment name that is not a shell identifier, a NUL or
// bytes that are not UTF-8, an argv[0] env would read as an option or an
// assignment, a line too long). The caller runs it the usual way; nothing
// ran.
var ErrNotLaunchable = errors.New("command not launchable through a prepared launcher")

// errNotLaunched: the launcher ended without printing launchMarker, so the
// command never started (no /bin/sh in the image, the launcher killed
// while it waited).
var errNotLaunched = errors.New("prepared launcher ended before starting the command")

// launchLine is the line that makes the launcher run cmd: check env was
// found (else exit without the marker: the caller execs instead), print the
// marker, exec env with the shell's own variables unset, base (the
// container's values of them), cmd.Env and argv.
func launchLine(cmd Command, base []string) ([]byte, error) {
	if len(cmd.Argv) == 0 {
		return nil, fmt.Errorf("%w: no argv", ErrNotLaunchable)
	}
	if a0 := cmd.Argv[0]; strings.HasPrefix(a0, "-") || strings.Contains(a0, "=") {
		// env would read it as an option or an assignment.
		return nil, fmt.Errorf("%w: argv[0] %q starts with '-' or holds '='", ErrNotLaunchable, a0)
	}
	var b strings.Builder
	// [ and printf are shell builtins; env is the path found at the start.
	fmt.Fprintf(&b, `[ -n "$e" ] || exit 124; printf '\%03o'; exec "$e"`, launchMarker)
	for _, v := range shellVars {
		b.WriteString(" -u " + v)
	}
	for _, kv := range slices.Concat(base, cmd.Env) {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !shellName(name) {
			return nil, fmt.Errorf("%w: environment entry %q is not NAME=value with a shell name", ErrNotLaunchable, name)
		}
		if !carriable(value) {
			return nil, fmt.Errorf("%w: environment value of %s holds a NUL or is not UTF-8", ErrNotLaunchable, name)
		}
		b.WriteString(" " + shellQuote(kv))
	}
	for _, a := range cmd.Argv {
		if !carriable(a) {
			return nil, fmt.Errorf("%w: argument holds a NUL or is not UTF-8", ErrNotLaunchable)
		}
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteByte('\n')
	if b.Len() > maxLaunchLine {
		return nil, fmt.Errorf("%w: line of %d bytes (at most %d)", ErrNotLaunchable, b.Len(), maxLaunchLine)
	}
	return []byte(b.String()), nil
}

// carriable reports whether s reaches the command through the line as it
// would through a plain exec: no NUL (which no exec can carry), and UTF-8,
// because the exec API's JSON turns every other byte into U+FFFD and the
// line would not (the command must get the same bytes either way).
func carriable(s string) bool {
	return strings.IndexByte(s, 0) < 0 && utf8.ValidString(s)
}

// baseVars picks from a container's configured env the entries of the
// shell's own variables, which the launch line sets back.
func baseVars(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(shellVars, name) {
			out = append(out, kv)
		}
	}
	return out
}

// shellQuote makes s one shell word that is exactly s, on one line: single
// quotes, in which nothing is special but the single quote itself, written
// as: close the quotes, a backslash-escaped quote, reopen; and a newline,
// written as: close, the launcher's newline variable in double quotes
// ("$nl"), reopen.
func shellQuote(s string) string {
	s = strings.ReplaceAll(s, `'`, `'\''`)
	s = strings.ReplaceAll(s, "\n", `'"$nl"'`)
	return "'" + s + "'"
}

// shellName reports whether s is a shell variable name: a name every shell
// and env take as one, and never an option.
func shellName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range []byte(s) {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// maxHeldStderr bounds the stderr kept back until the marker: the launcher
// itself only ever writes a short error there, so more is the command's.
const maxHeldStderr = 64 << 10

var errLaunchProtocol = errors.New("prepared launcher: first byte on stdout is not the launch marker")

// launchGate sits in front of the command's stdout and stderr: it strips
// the marker and holds stderr back until the marker is seen (the daemon
// copies the two streams separately, so the command's first stderr may
// arrive before the marker), so a launcher that fails writes nothing to
// the command's streams. StdCopy calls both writers from one goroutine.
type launchGate struct {
	line           []byte // written to the launcher's stdin first
	stdout, stderr io.Writer
	marked         bool // the marker came on stdout
	released       bool // stderr goes straight through
	held           []byte
}

// launched reports whether the command started: the marker came, or more
// stderr than the launcher ever writes.
func (g *launchGate) launched() bool { return g.marked || g.released }

func (g *launchGate) release() error {
	g.released = true
	if len(g.held) == 0 {
		return nil
	}
	_, err := g.stderr.Write(g.held)
	g.held = nil
	return err
}

type gateStdout struct{ g *launchGate }

func (w gateStdout) Write(p []byte) (int, error) {
	g := w.g
	n := len(p)
	if !g.marked {
		if len(p) == 0 {
			return 0, nil
		}
		if p[0] != launchMarker {
			return 0, errLaunchProtocol
		}
		g.marked = true
		p = p[1:]
		if !g.released {
			if err := g.release(); err != nil {
				return 0, err
			}
		}
	}
	if len(p) == 0 {
		return n, nil
	}
	if _, err := g.stdout.Write(p); err != nil {
		return 0, err
	}
	return n, nil
}

type gateStderr struct{ g *launchGate }

func (w gateStderr) Write(p []byte) (int, error) {
	g := w.g
	if !g.released {
		if len(g.held)+len(p) <= maxHeldStderr {
			g.held = append(g.held, p...)
			return len(p), nil
		}
		if err := g.release(); err != nil {
			return 0, err
		}
	}
	return g.stderr.Write(p)
}
