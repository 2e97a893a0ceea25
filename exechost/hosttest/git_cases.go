package hosttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
)

// gitRepo is a fresh repository under the harness's git root, removed when
// the test ends. git is the real one; the repository's own configuration is
// set by the case.
type gitRepo struct {
	t   *testing.T
	dir string
}

func (s *suite) gitRepo(t *testing.T) *gitRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	require.NotEmpty(t, s.h.GitRoot, "Harness.GitRoot is required for the git cases (a root the host was configured with)")
	dir, err := os.MkdirTemp(s.h.GitRoot, "repo-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	r := &gitRepo{t: t, dir: dir}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *gitRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=hosttest", "GIT_AUTHOR_EMAIL=hosttest@example.invalid",
		"GIT_COMMITTER_NAME=hosttest", "GIT_COMMITTER_EMAIL=hosttest@example.invalid",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	require.NoError(r.t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

func (r *gitRepo) write(name, content string) {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	require.NoError(r.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(r.t, os.WriteFile(p, []byte(content), 0o644))
}

func (r *gitRepo) commit() {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "--no-verify", "-m", "c")
}

// refusedGit provisions src and wants a policy refusal with no sandbox left.
func (s *suite) refusedGit(t *testing.T, src exechost.GitSource, want string) {
	t.Helper()
	req := s.request(t)
	req.Workspace.Git = &src
	_, err := s.h.Host.Provision(t.Context(), req)
	require.ErrorIs(t, err, exechost.ErrPolicy, "%+v", src)
	require.Contains(t, err.Error(), want)
	require.False(t, s.exists(t, req.ExecutionID), "a refused git import left a sandbox")
}

// gitHostile: a repository is content, not configuration. Nothing it
// configures runs on the worker, the workspace is exactly the revision's
// blobs, and the host's budget and path rules hold.
func (s *suite) gitHostile(t *testing.T) {
	t.Run("RepositoryConfigDoesNotRunOrRewrite", func(t *testing.T) {
		r := s.gitRepo(t)
		marker := filepath.Join(s.h.GitRoot, fmt.Sprintf("marker-%d", s.seq.Add(1)))
		t.Cleanup(func() { os.Remove(marker) })
		touch := "touch " + marker + "; cat"
		r.write(".gitattributes", "* filter=x diff=x\nsubst.txt export-subst\nignored.txt export-ignore\n")
		r.write("subst.txt", "id $Format:%H$\n")
		r.write("ignored.txt", "present\n")
		r.write("crlf.txt", "a\r\nb\n")
		r.commit()
		for _, kv := range [][2]string{
			{"filter.x.smudge", touch}, {"filter.x.process", touch}, {"filter.x.required", "true"},
			{"diff.x.textconv", touch}, {"core.fsmonitor", touch}, {"core.autocrlf", "true"},
			{"core.hooksPath", filepath.Join(r.dir, "hooks")},
		} {
			r.git("config", kv[0], kv[1])
		}
		r.write("hooks/post-checkout", "#!/bin/sh\ntouch "+marker+"\n")
		require.NoError(t, os.Chmod(filepath.Join(r.dir, "hooks/post-checkout"), 0o755))

		x := s.provision(t, func(p *exechost.ProvisionRequest) {
			p.Workspace.Git = &exechost.GitSource{RepositoryPath: r.dir, Revision: "main"}
		})
		require.Equal(t, "id $Format:%H$\n", s.run(t, x.ExecutionID, Cmd.Cat("subst.txt")), "export-subst applied")
		require.Equal(t, "present\n", s.run(t, x.ExecutionID, Cmd.Cat("ignored.txt")), "export-ignore applied")
		require.Equal(t, "a\r\nb\n", s.run(t, x.ExecutionID, Cmd.Cat("crlf.txt")), "eol conversion applied")
		_, err := os.Stat(marker)
		require.True(t, os.IsNotExist(err), "a command from the repository's configuration ran on the worker")
	})
	t.Run("ReplaceRefsIgnored", func(t *testing.T) {
		r := s.gitRepo(t)
		r.write("a.txt", "genuine\n")
		r.commit()
		r.write("evil.txt", "replaced\n")
		evil := r.git("hash-object", "-w", "evil.txt")
		require.NoError(t, os.Remove(filepath.Join(r.dir, "evil.txt")))
		r.git("replace", r.git("rev-parse", "HEAD:a.txt"), evil)
		x := s.provision(t, func(p *exechost.ProvisionRequest) {
			p.Workspace.Git = &exechost.GitSource{RepositoryPath: r.dir, Revision: "main"}
		})
		require.Equal(t, "genuine\n", s.run(t, x.ExecutionID, Cmd.Cat("a.txt")))
	})
	t.Run("RegexAndOptionRevisionsRefused", func(t *testing.T) {
		r := s.gitRepo(t)
		r.write("a", "a")
		r.commit()
		for _, rev := range []string{"main^{/c}", ":/c", "@{-1}", "main@{0}", "main:a", "--output=/tmp/x", "main..main", "main^{tree}"} {
			s.refusedGit(t, exechost.GitSource{RepositoryPath: r.dir, Revision: rev}, "revision")
		}
	})
	t.Run("RepositoryOutsideRootsOrThroughSymlinkRefused", func(t *testing.T) {
		r := s.gitRepo(t)
		r.write("a", "a")
		r.commit()
		outside := t.TempDir()
		out := &gitRepo{t: t, dir: outside}
		out.git("init", "-q", "-b", "main")
		out.write("a", "a")
		out.commit()
		s.refusedGit(t, exechost.GitSource{RepositoryPath: outside, Revision: "main"}, "not under a repository root")
		link := r.dir + "-link"
		require.NoError(t, os.Symlink(r.dir, link))
		t.Cleanup(func() { os.Remove(link) })
		s.refusedGit(t, exechost.GitSource{RepositoryPath: link, Revision: "main"}, "symlink")
		linkOut := r.dir + "-out"
		require.NoError(t, os.Symlink(outside, linkOut))
		t.Cleanup(func() { os.Remove(linkOut) })
		s.refusedGit(t, exechost.GitSource{RepositoryPath: linkOut, Revision: "main"}, "symlink")
	})
	t.Run("BudgetRefusedBeforeSandbox", func(t *testing.T) {
		require.Positive(t, s.h.GitMaxEntries, "Harness.GitMaxEntries is required (the entry cap the host was configured with)")
		r := s.gitRepo(t)
		for i := 0; i <= s.h.GitMaxEntries; i++ {
			r.write(fmt.Sprintf("d%d/f%d", i%10, i), "x")
		}
		r.commit()
		s.refusedGit(t, exechost.GitSource{RepositoryPath: r.dir, Revision: "main"}, "entries")

		big := s.gitRepo(t)
		f, err := os.Create(filepath.Join(big.dir, "big.bin"))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(s.h.Resources.DiskBytes+1))
		require.NoError(t, f.Close())
		big.commit()
		s.refusedGit(t, exechost.GitSource{RepositoryPath: big.dir, Revision: "main"}, "disk limit")
	})
	t.Run("SymlinkOutOfWorkspaceRefused", func(t *testing.T) {
		r := s.gitRepo(t)
		r.write("a", "a")
		require.NoError(t, os.Symlink("../../../etc/passwd", filepath.Join(r.dir, "out")))
		r.commit()
		s.refusedGit(t, exechost.GitSource{RepositoryPath: r.dir, Revision: "main"}, "outside the workspace")
	})
	t.Run("MissingRepositoryOrRevisionIsNonRetryable", func(t *testing.T) {
		r := s.gitRepo(t)
		r.write("a", "a")
		r.commit()
		for _, src := range []exechost.GitSource{
			{RepositoryPath: filepath.Join(s.h.GitRoot, "no-such-repo"), Revision: "main"},
			{RepositoryPath: r.dir, Revision: "no-such-branch"},
			{RepositoryPath: r.dir, Revision: strings.Repeat("d", 40)},
		} {
			req := s.request(t)
			req.Workspace.Git = &src
			_, err := s.h.Host.Provision(t.Context(), req)
			require.ErrorIs(t, err, exechost.ErrNotFound, "%+v", src)
			require.ErrorIs(t, err, exechost.ErrPolicy, "not found is not retryable: %+v", src)
			require.False(t, s.exists(t, req.ExecutionID))
		}
	})
}
