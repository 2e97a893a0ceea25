package hosttest

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// Commands is the small command vocabulary of the contract suite. Every
// command is a real POSIX shell invocation (it runs unchanged in any image
// with /bin/sh and busybox), and the Fake's DefaultHandler interprets exactly
// these forms. One vocabulary for both hosts means the contract suite never
// needs a per-host translation table that could drift.
//
// Paths are relative to the workspace.
type Commands struct{}

// Cmd is the vocabulary: hosttest.Cmd.Write("a.txt", "hi").
var Cmd Commands

// Each op is argv ["/bin/sh", "-c", script, name, args...]: the name lands in
// $0, so the Fake recognises an op by its name and its exact script.
const shell = "/bin/sh"

var scripts = map[string]string{
	opWrite:       `case $1 in */*) mkdir -p "${1%/*}" ;; esac; printf '%s' "$2" > "$1"`,
	opAppend:      `case $1 in */*) mkdir -p "${1%/*}" ;; esac; printf '%s' "$2" >> "$1"`,
	opCat:         `cat -- "$1"`,
	opSymlink:     `case $2 in */*) mkdir -p "${2%/*}" ;; esac; ln -s -- "$1" "$2"`,
	opEcho:        `cat`,
	opSleep:       `sleep "$1"`,
	opFlood:       `yes`,
	opExit:        `printf '%s' "$2" >&2; exit "$1"`,
	opPrintEnv:    `eval "test \"\${$1+set}\" = set" || exit 1; eval "printf '%s\n' \"\$$1\""`,
	opGated:       `printf 'start\n' >> "$1"; while [ ! -e "$2" ]; do sleep 0.05; done; printf 'end\n' >> "$1"`,
	opStderrGated: `printf '%s' "$1" >&2; while [ ! -e "$2" ]; do sleep 0.05; done; printf '%s' "$3" >&2`,
}

const (
	opWrite       = "hosttest-write"
	opAppend      = "hosttest-append"
	opCat         = "hosttest-cat"
	opSymlink     = "hosttest-symlink"
	opEcho        = "hosttest-echo"
	opSleep       = "hosttest-sleep"
	opFlood       = "hosttest-flood"
	opExit        = "hosttest-exit"
	opPrintEnv    = "hosttest-printenv"
	opGated       = "hosttest-gated"
	opStderrGated = "hosttest-stderr-gated"
)

func op(name string, args ...string) []string {
	return append([]string{shell, "-c", scripts[name], name}, args...)
}

// Write replaces path with content, creating parent directories.
func (Commands) Write(path, content string) []string { return op(opWrite, path, content) }

// Append appends content to path, creating it and its parents.
func (Commands) Append(path, content string) []string { return op(opAppend, path, content) }

// Symlink makes link a symbolic link to target, creating parent directories.
func (Commands) Symlink(target, link string) []string { return op(opSymlink, target, link) }

// Cat prints path; a missing file exits non-zero.
func (Commands) Cat(path string) []string { return op(opCat, path) }

// Echo copies stdin to stdout.
func (Commands) Echo() []string { return op(opEcho) }

// Sleep waits for d (rounded to milliseconds).
func (Commands) Sleep(d time.Duration) []string {
	return op(opSleep, strconv.FormatFloat(d.Seconds(), 'f', 3, 64))
}

// Flood writes "y\n" to stdout until it is stopped.
func (Commands) Flood() []string { return op(opFlood) }

// Exit writes stderr and exits with code.
func (Commands) Exit(code int, stderr string) []string {
	return op(opExit, strconv.Itoa(code), stderr)
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// PrintEnv prints the value of the environment variable name and a newline;
// an unset variable exits 1. name must be a valid variable name (it is
// evaluated by the shell).
func (Commands) PrintEnv(name string) []string {
	if !envName.MatchString(name) {
		panic(fmt.Sprintf("hosttest: PrintEnv(%q): not a variable name", name))
	}
	return op(opPrintEnv, name)
}

// Gated appends "start\n" to log, waits until gate exists, then appends
// "end\n". Whoever creates gate (outside the host's serialisation, see
// Harness.Probe) decides when the command finishes, so tests can hold an
// Exec running without timing assumptions.
func (Commands) Gated(log, gate string) []string { return op(opGated, log, gate) }

// StderrGated writes before to stderr, waits until gate exists, then
// writes after to stderr: a command whose first output is known to exist
// while it still runs (live stderr).
func (Commands) StderrGated(before, gate, after string) []string {
	return op(opStderrGated, before, gate, after)
}

// parse recognises a vocabulary command and returns its op and arguments.
func parse(argv []string) (name string, args []string, ok bool) {
	if len(argv) < 4 || argv[0] != shell || argv[1] != "-c" {
		return "", nil, false
	}
	s, known := scripts[argv[3]]
	if !known || s != argv[2] {
		return "", nil, false
	}
	return argv[3], argv[4:], true
}
