package runner

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/stretchr/testify/require"
)

// These tests run the launcher protocol for real: hostExec plays the
// Docker exec API with processes on this machine, so the launcher script
// runs in the host's /bin/sh (dash here; busybox ash in the sandbox tests
// of exechost/docker), and the command is this test binary as launchHelper,
// which reports exactly what it was given.

const helperEnv = "AGENTFLOW_LAUNCH_HELPER"

// launchHelper is the command of these tests: it prints its argv, its
// sorted environment and its stdin as JSON, and appends a line to the file
// named by AGENTFLOW_LAUNCH_COUNT (how many times it ran).
func launchHelper() {
	in, _ := io.ReadAll(os.Stdin)
	env := os.Environ()
	slices.Sort(env)
	if f := os.Getenv("AGENTFLOW_LAUNCH_COUNT"); f != "" {
		fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintln(fh, "ran")
			fh.Close()
		}
	}
	// Hex, as JSON would replace bytes that are not UTF-8.
	hexAll := func(ss []string) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = hex.EncodeToString([]byte(s))
		}
		return out
	}
	_ = json.NewEncoder(os.Stdout).Encode(helperView{Argv: hexAll(os.Args[1:]), Env: hexAll(env), Stdin: hex.EncodeToString(in)})
	fmt.Fprint(os.Stderr, "helper stderr")
	os.Exit(7)
}

type helperView struct {
	Argv  []string `json:"argv"`
	Env   []string `json:"env"`
	Stdin string   `json:"stdin"`
}

// hostExec plays the exec API with host processes. Every process starts
// from base, as a docker exec starts from the container's environment; a
// plain exec's Env replaces or adds entries as the daemon's merge does.
type hostExec struct {
	t    *testing.T
	base []string

	mu    sync.Mutex
	opts  map[string]container.ExecOptions
	procs map[string]*hostProc
	n     int
}

type hostProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	exit int
}

func newHostExec(t *testing.T, base []string) *hostExec {
	return &hostExec{t: t, base: base, opts: map[string]container.ExecOptions{}, procs: map[string]*hostProc{}}
}

func (h *hostExec) ContainerExecCreate(_ context.Context, _ string, o container.ExecOptions) (container.ExecCreateResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	id := fmt.Sprintf("exec-%d", h.n)
	h.opts[id] = o
	return container.ExecCreateResponse{ID: id}, nil
}

// lockedWriter serialises the two stdcopy writers on one pipe.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (h *hostExec) ContainerExecAttach(_ context.Context, id string, _ container.ExecAttachOptions) (types.HijackedResponse, error) {
	h.mu.Lock()
	o := h.opts[id]
	h.mu.Unlock()
	env := slices.Clone(h.base)
	for _, kv := range o.Env {
		name, _, _ := strings.Cut(kv, "=")
		env = slices.DeleteFunc(env, func(e string) bool { return strings.HasPrefix(e, name+"=") })
		env = append(env, kv)
	}
	cmd := exec.Command(o.Cmd[0], o.Cmd[1:]...)
	cmd.Env = env
	cmd.Dir = o.WorkingDir
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var mu sync.Mutex
	// An os.Pipe, not inR itself: exec.Cmd would wait for its copy of an
	// io.Reader to end, which a killed launcher's never does.
	pr, pw, err := os.Pipe()
	if err != nil {
		return types.HijackedResponse{}, err
	}
	if o.AttachStdin {
		cmd.Stdin = pr
	}
	cmd.Stdout = stdcopy.NewStdWriter(lockedWriter{&mu, outW}, stdcopy.Stdout)
	cmd.Stderr = stdcopy.NewStdWriter(lockedWriter{&mu, outW}, stdcopy.Stderr)
	p := &hostProc{cmd: cmd, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return types.HijackedResponse{}, err
	}
	pr.Close()
	go func() {
		_, _ = io.Copy(pw, inR)
		pw.Close()
		inR.CloseWithError(io.ErrClosedPipe)
	}()
	h.mu.Lock()
	h.procs[id] = p
	h.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.exit = cmd.ProcessState.ExitCode()
		if err != nil && p.exit < 0 {
			p.exit = 137
		}
		inR.Close()
		outW.Close()
		close(p.done)
	}()
	return types.NewHijackedResponse(&fakeConn{Reader: outR, inW: inW, outR: outR}, ""), nil
}

func (h *hostExec) ContainerExecStart(context.Context, string, container.ExecStartOptions) error {
	return nil
}

func (h *hostExec) ContainerExecInspect(_ context.Context, id string) (container.ExecInspect, error) {
	h.mu.Lock()
	p := h.procs[id]
	h.mu.Unlock()
	select {
	case <-p.done:
		return container.ExecInspect{ExecID: id, ExitCode: p.exit}, nil
	default:
		return container.ExecInspect{ExecID: id, Running: true}, nil
	}
}

func (h *hostExec) ContainerRemove(context.Context, string, container.RemoveOptions) error {
	h.t.Error("container removed: no test here expects it")
	return nil
}

func (h *hostExec) execCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// hostile are values a spec, a secret or an upstream may hand a step:
// every one must reach the command byte for byte and run nothing.
var hostile = []string{
	"", " ", "plain", "it's", "'", "''", `'\''`, `"`, `\`, `\\'`, "$HOME", "${HOME}", "$(touch /tmp/pwned)",
	"`touch /tmp/pwned`", "a;touch /tmp/pwned", "a && exit 0", "a | cat", "a\nb", "\n", "a\n'\nb", `'"$nl"'`,
	"$nl", "\t tab", "\r\n", "*", "?", "[a]", "~", "#comment", "!x", "%s%n", "-x", "--", "=", "a=b=c",
	"ünïcödé ✓", "\x01\x7f", "\u2028\u00a0", strings.Repeat("'", 100), "eval", "exit 0", "}", "{", "(", ")", "<", ">",
}

func helperCommand(t *testing.T, env, args []string) Command {
	exe, err := os.Executable()
	require.NoError(t, err)
	return Command{
		Argv:  append([]string{exe}, args...),
		Env:   append([]string{helperEnv + "=1"}, env...),
		User:  tool,
		Stdin: strings.NewReader("the step's input\nline 2\x00 and a NUL"),
	}
}

// run runs cmd plainly or through a fresh prepared launcher, and returns
// what the helper saw.
func runBoth(t *testing.T, h *hostExec, cmd Command) (plain, launched helperView) {
	t.Helper()
	r := fastRunner(h)
	view := func(res Result, err error, out, errOut *bytes.Buffer) helperView {
		t.Helper()
		require.NoError(t, err)
		require.Equal(t, 7, res.ExitCode)
		require.Equal(t, "helper stderr", errOut.String())
		var v helperView
		require.NoError(t, json.Unmarshal(out.Bytes(), &v), out.String())
		unhex := func(s string) string {
			b, err := hex.DecodeString(s)
			require.NoError(t, err)
			return string(b)
		}
		for _, ss := range [][]string{v.Argv, v.Env} {
			for i := range ss {
				ss[i] = unhex(ss[i])
			}
		}
		v.Stdin = unhex(v.Stdin)
		return v
	}
	var o1, e1, o2, e2 bytes.Buffer
	c1 := cmd
	c1.Stdout, c1.Stderr = &o1, &e1
	c1.Stdin = strings.NewReader("the step's input\nline 2\x00 and a NUL")
	res, err := r.Run(t.Context(), "c1", c1)
	plain = view(res, err, &o1, &e1)

	p, err := r.Prepare(t.Context(), "c1", PrepareOptions{User: tool, Env: h.base})
	require.NoError(t, err)
	before := h.execCount()
	c2 := cmd
	c2.Stdout, c2.Stderr = &o2, &e2
	c2.Stdin = strings.NewReader("the step's input\nline 2\x00 and a NUL")
	res, err = r.RunPrepared(t.Context(), p, "c1", c2)
	launched = view(res, err, &o2, &e2)
	require.True(t, res.Launched)
	require.Equal(t, before, h.execCount(), "the command ran through the launcher, not a new exec")
	return plain, launched
}

var hostBase = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOSTNAME=sandbox", "HOME=/workspace", helperEnv + "=1"}

// TestRunPreparedCarriesTheCommandExactly: through the launcher, a command
// gets the argv, environment and stdin a plain exec gives it, byte for
// byte, for every hostile value as an environment value and as an
// argument, and nothing in them runs.
func TestRunPreparedCarriesTheCommandExactly(t *testing.T) {
	_ = os.Remove("/tmp/pwned") // a leftover of a broken run would fail this one
	h := newHostExec(t, hostBase)
	env := make([]string, 0, len(hostile))
	for i, v := range hostile {
		env = append(env, fmt.Sprintf("V_%d=%s", i, v))
	}
	env = append(env, "PATH=/bin:/usr/bin", "HOME=/elsewhere") // an exec's Env replaces the container's
	plain, launched := runBoth(t, h, helperCommand(t, env, hostile))
	require.Equal(t, plain, launched)
	require.Equal(t, hostile, launched.Argv)
	require.Equal(t, "the step's input\nline 2\x00 and a NUL", launched.Stdin)
	for i, v := range hostile {
		require.Contains(t, launched.Env, fmt.Sprintf("V_%d=%s", i, v))
	}
	require.Contains(t, launched.Env, "PATH=/bin:/usr/bin")
	require.NotContains(t, launched.Env, "PATH=/usr/sbin:/usr/bin:/sbin:/bin")
	for _, v := range shellVars {
		for _, kv := range launched.Env {
			require.False(t, strings.HasPrefix(kv, v+"="), "the shell's %s leaked into the command's environment", v)
		}
	}
	_, err := os.Stat("/tmp/pwned")
	require.True(t, os.IsNotExist(err), "a value ran as a command")
}

// TestRunPreparedRandomValues: random values over the bytes a shell treats
// specially (and a few it does not) survive the line exactly.
func TestRunPreparedRandomValues(t *testing.T) {
	h := newHostExec(t, hostBase)
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	alphabet := []rune("'\"\\$`\n\r\t ;|&<>(){}[]*?~#!=%-aZ09\x01\x7fé✓\u2028")
	for round := range 4 {
		var env, args []string
		for i := range 40 {
			b := make([]rune, rng.IntN(24))
			for j := range b {
				b[j] = alphabet[rng.IntN(len(alphabet))]
			}
			env = append(env, fmt.Sprintf("R%d_%d=%s", round, i, string(b)))
			args = append(args, string(b))
		}
		plain, launched := runBoth(t, h, helperCommand(t, env, args))
		require.Equal(t, plain, launched, "round %d", round)
		require.Equal(t, args, launched.Argv)
	}
}

// TestRunPreparedShellVarsFromTheContainer: where the container's own
// configuration sets a variable the shell or the launcher script also sets
// (PWD, SHLVL; l, which holds the whole line), the command gets the
// container's value, as from a plain exec.
func TestRunPreparedShellVarsFromTheContainer(t *testing.T) {
	own := []string{"SHLVL=41", "PWD=/from/image", "e=E", "l=L", "nl=NL", "f=F", "c=C"}
	h := newHostExec(t, append(slices.Clone(hostBase), own...))
	plain, launched := runBoth(t, h, helperCommand(t, []string{"SECRET=s3cr3t"}, []string{"x"}))
	require.Equal(t, plain, launched)
	for _, kv := range own {
		require.Contains(t, launched.Env, kv, "the script's own variable leaked over the container's")
	}
}

// TestRunPreparedFallsBack: a launcher that cannot start the command (it
// died while it waited; it is for another user; the command cannot be
// carried exactly) costs a plain exec, and the command runs once.
func TestRunPreparedFallsBack(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(t *testing.T, h *hostExec, p *Prepared)
		mutate  func(t *testing.T, c *Command)
	}{
		{name: "launcher killed while it waited", prepare: func(t *testing.T, h *hostExec, p *Prepared) {
			h.mu.Lock()
			proc := h.procs[p.execID]
			h.mu.Unlock()
			require.NoError(t, proc.cmd.Process.Kill())
			<-proc.done
		}},
		{name: "another user", mutate: func(_ *testing.T, c *Command) { c.User = "1000:1000" }},
		{name: "environment name not a shell name", mutate: func(_ *testing.T, c *Command) { c.Env = append(c.Env, "A.B=1") }},
		{name: "argv[0] with an equals sign", mutate: func(t *testing.T, c *Command) {
			link := filepath.Join(t.TempDir(), "tool=x")
			require.NoError(t, os.Symlink(c.Argv[0], link))
			c.Argv[0] = link
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostExec(t, hostBase)
			r := fastRunner(h)
			count := filepath.Join(t.TempDir(), "count")
			cmd := helperCommand(t, []string{"AGENTFLOW_LAUNCH_COUNT=" + count}, []string{"a"})
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			p, err := r.Prepare(t.Context(), "c1", PrepareOptions{User: tool, Env: h.base})
			require.NoError(t, err)
			if tc.prepare != nil {
				tc.prepare(t, h, p)
			}
			if tc.mutate != nil {
				tc.mutate(t, &cmd)
			}
			res, err := r.RunPrepared(t.Context(), p, "c1", cmd)
			require.NoError(t, err)
			require.Equal(t, 7, res.ExitCode)
			require.False(t, res.Launched)
			require.Equal(t, 2, h.execCount(), "the launcher, then one plain exec")
			require.Equal(t, "helper stderr", errOut.String(), "nothing of the launcher's own output")
			b, err := os.ReadFile(count)
			require.NoError(t, err)
			require.Equal(t, "ran\n", string(b), "the command ran exactly once")
		})
	}
}

// TestLaunchLineRefuses: what a line cannot carry exactly is refused, so
// the caller execs it plainly.
func TestLaunchLineRefuses(t *testing.T) {
	for name, cmd := range map[string]Command{
		"no argv":                 {},
		"option argv[0]":          {Argv: []string{"-i"}},
		"assignment argv[0]":      {Argv: []string{"A=b"}},
		"NUL in an argument":      {Argv: []string{"/bin/tool", "a\x00b"}},
		"NUL in a value":          {Argv: []string{"/bin/tool"}, Env: []string{"A=a\x00b"}},
		"entry without =":         {Argv: []string{"/bin/tool"}, Env: []string{"A"}},
		"empty name":              {Argv: []string{"/bin/tool"}, Env: []string{"=x"}},
		"name with a dash":        {Argv: []string{"/bin/tool"}, Env: []string{"-u=x"}},
		"name with a dot":         {Argv: []string{"/bin/tool"}, Env: []string{"a.b=x"}},
		"name with a space":       {Argv: []string{"/bin/tool"}, Env: []string{"a b=x"}},
		"name with a digit first": {Argv: []string{"/bin/tool"}, Env: []string{"1A=x"}},
		"line too long":           {Argv: []string{"/bin/tool"}, Env: []string{"A=" + strings.Repeat("x", maxLaunchLine)}},
	} {
		_, err := launchLine(cmd, nil)
		require.ErrorIs(t, err, ErrNotLaunchable, name)
	}
	line, err := launchLine(Command{Argv: []string{"/bin/tool"}, Env: []string{"_A1=x"}}, nil)
	require.NoError(t, err)
	require.Equal(t, byte('\n'), line[len(line)-1])
	require.Equal(t, 1, bytes.Count(line, []byte("\n")), "one line")
}

// TestLaunchGate: the marker is stripped; stderr before it is held and
// then passed on in order; a launcher that never prints it writes nothing
// to the command's streams; a wrong first byte is a protocol error.
func TestLaunchGate(t *testing.T) {
	var out, errOut bytes.Buffer
	g := &launchGate{stdout: &out, stderr: &errOut}
	so, se := gateStdout{g}, gateStderr{g}
	_, _ = se.Write([]byte("early "))
	require.Empty(t, errOut.String())
	_, err := so.Write([]byte{launchMarker, 'h', 'i'})
	require.NoError(t, err)
	_, _ = se.Write([]byte("late"))
	require.True(t, g.launched())
	require.Equal(t, "hi", out.String())
	require.Equal(t, "early late", errOut.String())

	out.Reset()
	errOut.Reset()
	g = &launchGate{stdout: &out, stderr: &errOut}
	_, _ = gateStderr{g}.Write([]byte("sh: env: not found"))
	require.False(t, g.launched())
	require.Empty(t, errOut.String())

	g = &launchGate{stdout: &out, stderr: &errOut}
	_, err = gateStdout{g}.Write([]byte("x"))
	require.ErrorIs(t, err, errLaunchProtocol)

	g = &launchGate{stdout: &out, stderr: &errOut}
	_, _ = gateStderr{g}.Write(bytes.Repeat([]byte("e"), maxHeldStderr+1))
	require.True(t, g.launched(), "more stderr than a launcher writes is the command's")
	_, err = gateStdout{g}.Write([]byte{launchMarker, 'o'})
	require.NoError(t, err)
	require.Equal(t, "o", out.String(), "the marker is stripped after a release too")
}

// TestPreparedCloseUnused: an unused launcher's Close ends it without
// running anything, and a later RunPrepared with it falls back.
func TestPreparedCloseUnused(t *testing.T) {
	h := newHostExec(t, hostBase)
	r := fastRunner(h)
	p, err := r.Prepare(t.Context(), "c1", PrepareOptions{User: tool, Env: h.base})
	require.NoError(t, err)
	p.Close()
	p.Close()
	h.mu.Lock()
	proc := h.procs[p.execID]
	h.mu.Unlock()
	select {
	case <-proc.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the launcher did not end when its stdin closed")
	}
	require.Equal(t, 125, proc.exit)
	var nilP *Prepared
	nilP.Close() // no launcher: nothing to release
}

// TestRunPreparedDoneContext: a context done before the command starts
// runs nothing and destroys nothing, as a plain exec's create would fail.
func TestRunPreparedDoneContext(t *testing.T) {
	h := newHostExec(t, hostBase)
	r := fastRunner(h)
	p, err := r.Prepare(t.Context(), "c1", PrepareOptions{User: tool, Env: h.base})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	count := filepath.Join(t.TempDir(), "count")
	_, err = r.RunPrepared(ctx, p, "c1", helperCommand(t, []string{"AGENTFLOW_LAUNCH_COUNT=" + count}, nil))
	require.ErrorIs(t, err, context.Canceled)
	h.mu.Lock()
	proc := h.procs[p.execID]
	h.mu.Unlock()
	<-proc.done
	require.Equal(t, 125, proc.exit, "the launcher ran nothing")
	_, err = os.Stat(count)
	require.True(t, os.IsNotExist(err), "the command did not run")
}

// TestPrepareWarms: the launcher reads the files it is told to warm before
// it waits (a FIFO shows the read), skips missing ones, never evaluates
// their names, and still runs the command exactly.
func TestPrepareWarms(t *testing.T) {
	_ = os.Remove("/tmp/pwned")
	h := newHostExec(t, hostBase)
	r := fastRunner(h)
	fifo := filepath.Join(t.TempDir(), "tool")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	p, err := r.Prepare(t.Context(), "c1", PrepareOptions{User: tool, Env: h.base,
		Warm: []string{"/nonexistent/tool", "$(touch /tmp/pwned)", fifo}})
	require.NoError(t, err)
	opened := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0) // blocks until the launcher opens it to read
		if err == nil {
			_, err = f.WriteString("the binary's pages")
			f.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the launcher never read the file it was to warm")
	}
	var out, errOut bytes.Buffer
	cmd := helperCommand(t, nil, []string{"a"})
	cmd.Stdout, cmd.Stderr = &out, &errOut
	res, err := r.RunPrepared(t.Context(), p, "c1", cmd)
	require.NoError(t, err)
	require.True(t, res.Launched)
	require.Equal(t, 7, res.ExitCode)
	require.Equal(t, "helper stderr", errOut.String(), "nothing of cat's errors")
	_, err = os.Stat("/tmp/pwned")
	require.True(t, os.IsNotExist(err), "a file name ran as a command")
}

// TestLaunchLineRunsNothingFromPath: the launcher finds env by absolute
// path, never through PATH: an earlier step can write the workspace, and a
// container whose PATH names a directory in it would otherwise run that
// step's planted `env` with this step's secrets (a plain exec of
// /bin/tool looks nothing up).
func TestLaunchLineRunsNothingFromPath(t *testing.T) {
	planted := t.TempDir()
	pwned := filepath.Join(t.TempDir(), "pwned")
	for _, name := range []string{"env", "printf", "cat", "["} {
		require.NoError(t, os.WriteFile(filepath.Join(planted, name),
			[]byte("#!/bin/sh\necho \"$0 $*\" >> "+pwned+"\n"), 0o755))
	}
	base := []string{"PATH=" + planted + ":/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/workspace", helperEnv + "=1"}
	h := newHostExec(t, base)
	r := fastRunner(h)
	p, err := r.Prepare(t.Context(), "c1", PrepareOptions{User: tool, Env: base})
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	cmd := helperCommand(t, []string{"SECRET=s3cr3t"}, []string{"a"})
	cmd.Stdout, cmd.Stderr = &out, &errOut
	res, err := r.RunPrepared(t.Context(), p, "c1", cmd)
	require.NoError(t, err)
	require.True(t, res.Launched)
	require.Equal(t, 7, res.ExitCode, errOut.String())
	b, err := os.ReadFile(pwned)
	require.True(t, os.IsNotExist(err), "a program planted on PATH ran: %s", b)
}
