package hosttest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/gitsource"
	"github.com/agentflow/agentflow/exechost/hosttest"
)

var fakeImage = "sha256:" + strings.Repeat("ab", 32)

func newFake(t *testing.T, opts hosttest.Options) *hosttest.Fake {
	t.Helper()
	if opts.Images == nil {
		opts.Images = []string{fakeImage}
	}
	f, err := hosttest.NewFake(opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		s := f.Stats()
		require.Zero(t, s.Live, "sandboxes left alive: %+v", s)
		require.Zero(t, s.Overlaps, "Exec and Checkpoint overlapped: %+v", s)
		require.Equal(t, s.Provisioned, s.Terminated+s.Destroyed, "every sandbox ended exactly once: %+v", s)
	})
	return f
}

func fakeHarness(f *hosttest.Fake) hosttest.Harness {
	return hosttest.Harness{
		Host:          f,
		Image:         fakeImage,
		Labels:        map[string]string{"agentflow.test": "1"},
		ShortTimeout:  20 * time.Millisecond,
		OverlapWindow: 20 * time.Millisecond,
		Probe: func(ctx context.Context, id exechost.ExecutionID, argv []string) ([]byte, int, error) {
			r, err := f.Probe(ctx, id, argv)
			return r.Stdout, r.ExitCode, err
		},
		Exists: func(_ context.Context, id exechost.ExecutionID) (bool, error) { return f.Live(id), nil },
		Kill: func(_ context.Context, id exechost.ExecutionID) error {
			f.Kill(id)
			return nil
		},
		CheckpointContent: func(_ context.Context, id exechost.CheckpointID) ([]byte, error) {
			files, err := f.CheckpointFiles(id)
			return hosttest.Encode(files), err
		},
		TamperCheckpoint: func(_ context.Context, id exechost.CheckpointID) error {
			return f.TamperCheckpoint(id, func(files map[string]hosttest.File) {
				for p, fl := range files {
					fl.Data[len(fl.Data)/2] ^= 1
					files[p] = fl
					return
				}
			})
		},
	}
}

func TestFakeContract(t *testing.T) {
	defer goleak.VerifyNone(t)
	root := gitRoot(t)
	f := newFake(t, hosttest.Options{GitSource: gitsource.Config{Roots: []string{root}, MaxEntries: 200}})
	h := fakeHarness(f)
	h.GitRoot, h.GitMaxEntries = root, 200
	hosttest.Run(t, h)
	require.Positive(t, f.Stats().Provisioned)
}

func provision(t *testing.T, f *hosttest.Fake, mutate func(*exechost.ProvisionRequest)) exechost.ExecutionID {
	t.Helper()
	req := exechost.ProvisionRequest{
		ExecutionID: exechost.ExecutionID(t.Name()), Image: fakeImage,
		Resources: hosttest.DefaultResources(), Network: exechost.NetworkNone,
	}
	if mutate != nil {
		mutate(&req)
	}
	x, err := f.Provision(t.Context(), req)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.Terminate(context.Background(), x.ExecutionID)) })
	return x.ExecutionID
}

func TestHandlerSeesTheProcessView(t *testing.T) {
	var seen hosttest.ExecContext
	f := newFake(t, hosttest.Options{Handler: func(ctx context.Context, x hosttest.ExecContext) hosttest.Result {
		if x.Argv[0] != "/bin/tool" {
			return hosttest.DefaultHandler(ctx, x)
		}
		seen = x
		in, err := x.Workspace.ReadFile("input.txt")
		if err != nil {
			return hosttest.Result{ExitCode: 2, Stderr: []byte(err.Error())}
		}
		if err := x.Workspace.WriteFile("out/result.txt", append(in, x.Stdin...), 0o600); err != nil {
			return hosttest.Result{ExitCode: 3}
		}
		_, _ = x.Stdout.Write([]byte("streamed "))
		return hosttest.Result{ExitCode: 0, Stdout: []byte("returned"), OOMKilled: true}
	}})
	id := provision(t, f, func(r *exechost.ProvisionRequest) { r.Env = map[string]string{"MODE": "prov", "KEEP": "k"} })

	res, err := f.Exec(t.Context(), id, exechost.ExecRequest{Command: hosttest.Cmd.Write("input.txt", "in:")})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)

	res, err = f.Exec(t.Context(), id, exechost.ExecRequest{
		Command: []string{"/bin/tool", "--flag"},
		Stdin:   []byte("stdin"),
		Env:     map[string]string{"MODE": "exec"},
		Secrets: map[string]string{"API_TOKEN": "tok"},
	})
	require.NoError(t, err)
	require.Equal(t, "streamed returned", string(res.Stdout))
	require.True(t, res.OOMKilled)
	require.Equal(t, []string{"/bin/tool", "--flag"}, seen.Argv)
	require.Equal(t, "stdin", string(seen.Stdin))
	require.Equal(t, map[string]string{"MODE": "exec", "KEEP": "k", "API_TOKEN": "tok"}, seen.Env, "exec env overrides provision env")
	require.Equal(t, map[string]string{"API_TOKEN": "tok"}, seen.Secrets)

	files, err := f.Files(id)
	require.NoError(t, err)
	require.Equal(t, hosttest.File{Data: []byte("in:stdin"), Mode: 0o600}, files["out/result.txt"])

	res, err = f.Exec(t.Context(), id, exechost.ExecRequest{Command: []string{"unknown-tool"}})
	require.NoError(t, err)
	require.Equal(t, 127, res.ExitCode)
}

func TestReturnedOutputCountsAgainstTheCap(t *testing.T) {
	f := newFake(t, hosttest.Options{Handler: func(context.Context, hosttest.ExecContext) hosttest.Result {
		return hosttest.Result{Stdout: []byte(strings.Repeat("x", 10)), Stderr: []byte(strings.Repeat("e", 10))}
	}})
	id := provision(t, f, func(r *exechost.ProvisionRequest) { r.Resources.MaxOutputBytes = 15 })
	res, err := f.Exec(t.Context(), id, exechost.ExecRequest{Command: []string{"tool"}})
	require.ErrorIs(t, err, exechost.ErrOutputLimit)
	require.True(t, res.Truncated)
	require.Equal(t, "xxxxxxxxxx", string(res.Stdout))
	require.Equal(t, "eeeee", string(res.Stderr))
	require.False(t, f.Live(id))
}

func TestDiskLimit(t *testing.T) {
	f := newFake(t, hosttest.Options{})
	id := provision(t, f, func(r *exechost.ProvisionRequest) { r.Resources.DiskBytes = 1 << 20 })
	res, err := f.Exec(t.Context(), id, exechost.ExecRequest{Command: hosttest.Cmd.Write("big", strings.Repeat("x", 1<<20+1))})
	require.NoError(t, err)
	require.Equal(t, 1, res.ExitCode)
	require.Contains(t, string(res.Stderr), "no space left")
}

func TestSandboxDeadline(t *testing.T) {
	f := newFake(t, hosttest.Options{})
	id := provision(t, f, func(r *exechost.ProvisionRequest) { r.Resources.Runtime = time.Second })
	res, err := f.Exec(t.Context(), id, exechost.ExecRequest{Command: hosttest.Cmd.Sleep(time.Hour)})
	require.ErrorIs(t, err, exechost.ErrTimeout)
	require.True(t, res.TimedOut)
	_, err = f.Exec(t.Context(), id, exechost.ExecRequest{Command: hosttest.Cmd.Exit(0, "")})
	require.ErrorIs(t, err, exechost.ErrTerminated)
	require.Equal(t, 1, f.Stats().Destroyed)
}

func TestUnknownImagesWhenListed(t *testing.T) {
	f := newFake(t, hosttest.Options{})
	_, err := f.Provision(t.Context(), exechost.ProvisionRequest{
		ExecutionID: "x", Image: "sha256:" + strings.Repeat("cd", 32), Resources: hosttest.DefaultResources(),
	})
	require.ErrorIs(t, err, exechost.ErrNotFound)

	// Without a list, every pinned image exists and a repo digest is its own identity.
	open, err := hosttest.NewFake(hosttest.Options{})
	require.NoError(t, err)
	x, err := open.Provision(t.Context(), exechost.ProvisionRequest{
		ExecutionID: "y", Image: "example/tool@sha256:" + strings.Repeat("ef", 32), Resources: hosttest.DefaultResources(),
	})
	require.NoError(t, err)
	require.Equal(t, "sha256:"+strings.Repeat("ef", 32), x.ImageDigest)
	require.NoError(t, open.Terminate(t.Context(), "y"))
}

func TestGitWorkspace(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root := gitRoot(t)
	repo := filepath.Join(root, "repo")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	require.NoError(t, os.MkdirAll(repo, 0o755))
	git("init", "-q")
	require.NoError(t, writeFile(filepath.Join(repo, "src", "main.go"), "package main\n"))
	git("add", ".")
	git("commit", "-q", "-m", "one")

	_, err := newFake(t, hosttest.Options{}).Provision(t.Context(), exechost.ProvisionRequest{
		ExecutionID: "no-root", Image: fakeImage, Resources: hosttest.DefaultResources(),
		Workspace: exechost.Workspace{Git: &exechost.GitSource{RepositoryPath: repo, Revision: "HEAD"}},
	})
	require.ErrorIs(t, err, exechost.ErrPolicy, "no --git-root: git import refused")
	require.Contains(t, err.Error(), "--git-root")

	f := newFake(t, hosttest.Options{GitSource: gitsource.Config{Roots: []string{root}}})
	id := provision(t, f, func(r *exechost.ProvisionRequest) {
		r.Workspace.Git = &exechost.GitSource{RepositoryPath: repo, Revision: "HEAD"}
	})
	res, err := f.Exec(t.Context(), id, exechost.ExecRequest{Command: hosttest.Cmd.Cat("src/main.go")})
	require.NoError(t, err)
	require.Equal(t, "package main\n", string(res.Stdout))
	files, err := f.Files(id)
	require.NoError(t, err)
	require.Len(t, files, 1, "no .git, only the tree")

	_, err = f.Provision(t.Context(), exechost.ProvisionRequest{
		ExecutionID: "missing-rev", Image: fakeImage, Resources: hosttest.DefaultResources(),
		Workspace: exechost.Workspace{Git: &exechost.GitSource{RepositoryPath: repo, Revision: "no-such-branch"}},
	})
	require.ErrorIs(t, err, exechost.ErrNotFound)
}

func writeFile(name, content string) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	return os.WriteFile(name, []byte(content), 0o644)
}

// gitRoot is a fresh git root for a test: a temporary directory with no
// symlink on its path (gitsource refuses symlinked roots).
func gitRoot(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return d
}
