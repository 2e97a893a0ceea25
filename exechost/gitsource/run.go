package gitsource

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// MaxStderr bounds what is kept of one git process's stderr.
const MaxStderr = 64 << 10

// truncatedMarker ends a stderr that was cut at MaxStderr.
const truncatedMarker = "…[git stderr truncated]"

// env is the whole environment of every git process: nothing from the
// worker's (no GIT_DIR, GIT_CONFIG_*, GIT_EXEC_PATH, HOME, XDG_*), no
// system or global configuration, no replace refs, no prompts, no locks.
func env(gitDir string) []string {
	return []string{
		"PATH=/usr/bin:/bin",
		"HOME=/nonexistent",
		"LC_ALL=C",
		"GIT_DIR=" + gitDir,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_NO_LAZY_FETCH=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_PAGER=cat",
		"GIT_ASKPASS=/bin/false",
		"GIT_SSH_COMMAND=/bin/false",
		"GIT_PROTOCOL_FROM_USER=0",
	}
}

// overrides neutralise, as command-line configuration (which wins over any
// file), every setting that could run a command, fetch, or rewrite content.
// The private git directory has no repository configuration to begin with
// (see Prepare); these hold even if that ever changes.
var overrides = []string{
	"-c", "core.fsmonitor=false",
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.attributesFile=/dev/null",
	"-c", "core.alternateRefsCommand=",
	"-c", "core.sshCommand=/bin/false",
	"-c", "core.askPass=/bin/false",
	"-c", "core.pager=cat",
	"-c", "protocol.allow=never",
	"-c", "uploadpack.packObjectsHook=",
	"-c", "gpg.program=/bin/false",
	"-c", "credential.helper=",
}

// command builds one git process over the private git directory.
func (im *Importer) command(ctx context.Context, gitDir string, args ...string) (*exec.Cmd, *boundedBuffer) {
	argv := append(append([]string{"--no-replace-objects", "--no-pager"}, overrides...), args...)
	cmd := exec.CommandContext(ctx, im.git, argv...)
	cmd.Env = env(gitDir)
	cmd.Dir = gitDir
	stderr := &boundedBuffer{max: MaxStderr}
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	return cmd, stderr
}

// output runs git and returns at most max bytes of its stdout; more is an
// error (the process is stopped as soon as it passes max).
func (im *Importer) output(ctx context.Context, gitDir string, max int, args ...string) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd, stderr := im.command(ctx, gitDir, args...)
	out := &boundedBuffer{max: max, onOverflow: cancel}
	cmd.Stdout = out
	err := cmd.Run()
	if out.truncated {
		return nil, fmt.Errorf("git %s: output larger than %d bytes", args[0], max)
	}
	if err != nil {
		return out.Bytes(), &gitError{op: args[0], err: err, stderr: stderr.String()}
	}
	return out.Bytes(), nil
}

// gitError is a failed git process with its (bounded) stderr.
type gitError struct {
	op     string
	err    error
	stderr string
}

func (e *gitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", e.op, e.err, strings.TrimSpace(e.stderr))
}

func (e *gitError) Unwrap() error { return e.err }

// exitCode is git's exit status, or -1.
func (e *gitError) exitCode() int {
	if ee, ok := e.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// boundedBuffer keeps the first max bytes written and drops the rest, never
// failing a write (so git is not killed by EPIPE on a chatty stderr).
type boundedBuffer struct {
	mu         sync.Mutex
	buf        bytes.Buffer
	max        int
	truncated  bool
	onOverflow func()
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - b.buf.Len()
	if len(p) > room {
		b.buf.Write(p[:max(room, 0)])
		if !b.truncated && b.onOverflow != nil {
			b.onOverflow()
		}
		b.truncated = true
		return len(p), nil
	}
	b.buf.Write(p)
	return len(p), nil
}

func (b *boundedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.truncated {
		return b.buf.String() + truncatedMarker
	}
	return b.buf.String()
}
