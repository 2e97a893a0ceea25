package gitsource_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/gitsource"
)

// repo is a test repository under a root, built with the real git.
type repo struct {
	t    *testing.T
	root string
	dir  string
}

func newRepo(t *testing.T, root string) *repo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir, err := os.MkdirTemp(root, "repo-")
	require.NoError(t, err)
	r := &repo{t: t, root: root, dir: dir}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null", "HOME="+r.dir)
	out, err := cmd.CombinedOutput()
	require.NoError(r.t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

func (r *repo) write(name, content string, mode os.FileMode) {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	require.NoError(r.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(r.t, os.WriteFile(p, []byte(content), mode))
	require.NoError(r.t, os.Chmod(p, mode))
}

func (r *repo) commit(msg string) string {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "--no-verify", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

type entry struct {
	typ  byte
	mode int64
	data string
	link string
}

func importer(t *testing.T, cfg gitsource.Config) *gitsource.Importer {
	t.Helper()
	im, err := gitsource.New(cfg)
	require.NoError(t, err)
	return im
}

// export runs Prepare and Open and reads the whole tar stream.
func export(t *testing.T, im *gitsource.Importer, repo, rev string, maxBytes int64) (map[string]entry, error) {
	t.Helper()
	tree, err := im.Prepare(t.Context(), exechost.GitSource{RepositoryPath: repo, Revision: rev}, maxBytes)
	if err != nil {
		return nil, err
	}
	rc, err := tree.Open(t.Context())
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	files := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[h.Name] = entry{typ: h.Typeflag, mode: h.Mode, data: string(data), link: h.Linkname}
	}
}

func root(t *testing.T) string {
	d, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return d
}

func TestExportIsExactlyTheRevision(t *testing.T) {
	rt := root(t)
	r := newRepo(t, rt)
	r.write("src/main.txt", "v1\n", 0o644)
	r.write("build.sh", "#!/bin/sh\necho built\n", 0o755)
	require.NoError(t, os.Symlink("src/main.txt", filepath.Join(r.dir, "current")))
	r.commit("one")
	r.git("tag", "v1")
	r.write("src/main.txt", "v2\n", 0o644)
	second := r.commit("two")

	im := importer(t, gitsource.Config{Roots: []string{rt}})
	files, err := export(t, im, r.dir, "v1", 1<<20)
	require.NoError(t, err)
	require.Equal(t, map[string]entry{
		"src/":         {typ: tar.TypeDir, mode: 0o755},
		"src/main.txt": {typ: tar.TypeReg, mode: 0o644, data: "v1\n"},
		"build.sh":     {typ: tar.TypeReg, mode: 0o755, data: "#!/bin/sh\necho built\n"},
		"current":      {typ: tar.TypeSymlink, mode: 0o777, link: "src/main.txt"},
	}, files)

	for _, rev := range []string{"main", "HEAD", second, second[:7], "refs/heads/main", "main~1", "main^", "HEAD~0^0", "v1"} {
		_, err := export(t, im, r.dir, rev, 1<<20)
		require.NoError(t, err, rev)
	}
	files, err = export(t, im, r.dir, "main~1", 1<<20)
	require.NoError(t, err)
	require.Equal(t, "v1\n", files["src/main.txt"].data)
}

func TestCheckRevision(t *testing.T) {
	for _, ok := range []string{"main", "v1.0", "feature/x-y_z", "HEAD", "HEAD~2", "main^2", "main~1^2~3", "abc1234",
		strings.Repeat("a", 40), strings.Repeat("0", 64), "refs/tags/v1", "xyz", "release-2024", "x~", "x^"} {
		require.NoError(t, exechost.CheckRevision(ok), ok)
	}
	for _, bad := range []string{"", "-x", "--output=/tmp/x", "--all", "main^{/regex}", ":/regex", "@{-1}", "HEAD@{1}",
		"main:path", "a..b", "a...b", "main^{commit}", "main^{tree}", "abc12", "abc", "@", ".hidden", "x/.y", "x.lock",
		"a//b", "/a", "a/", "a b", "a\tb", "a\nb", "main~123456", `a\b`, "x*", "x?", "x[1]", "main^!", "main^@",
		"main^-1", "x.", "héllo", strings.Repeat("a", 300), "main~1:README"} {
		err := exechost.CheckRevision(bad)
		require.Error(t, err, "%q", bad)
	}
}

func TestRevisionsRefusedBeforeGitRuns(t *testing.T) {
	rt := root(t)
	r := newRepo(t, rt)
	r.write("a", "a", 0o644)
	r.commit("one")
	im := importer(t, gitsource.Config{Roots: []string{rt}})
	for _, rev := range []string{"main^{/one}", ":/one", "@{-1}", "--output=" + filepath.Join(rt, "pwned"), "main^{tree}"} {
		_, err := im.Prepare(t.Context(), exechost.GitSource{RepositoryPath: r.dir, Revision: rev}, 1<<20)
		var pe *exechost.PolicyError
		require.ErrorAs(t, err, &pe, rev)
		require.Equal(t, "workspace.git.revision", pe.Field)
	}
	_, err := os.Stat(filepath.Join(rt, "pwned"))
	require.True(t, os.IsNotExist(err))
}

// TestRepositoryConfigNeverRuns commits a repository whose configuration
// and attributes would run commands or rewrite content under git archive or
// a checkout: filters (smudge, clean, process), textconv, hooks, fsmonitor,
// export-subst, export-ignore, a pager. Each command would create a marker.
func TestRepositoryConfigNeverRuns(t *testing.T) {
	rt := root(t)
	r := newRepo(t, rt)
	marker := filepath.Join(rt, "marker")
	touch := "touch " + marker + "; cat"
	r.write(".gitattributes", "* filter=x diff=x\nsubst.txt export-subst\nignored.txt export-ignore\n", 0o644)
	r.write("subst.txt", "commit $Format:%H$\n", 0o644)
	r.write("ignored.txt", "still here\n", 0o644)
	r.write("plain.txt", "plain bytes\r\n", 0o644)
	r.commit("one")
	for _, kv := range [][2]string{
		{"filter.x.smudge", touch}, {"filter.x.clean", touch}, {"filter.x.process", touch}, {"filter.x.required", "true"},
		{"diff.x.textconv", touch}, {"core.fsmonitor", touch}, {"core.pager", touch}, {"core.hooksPath", filepath.Join(r.dir, "hooks")},
		{"core.autocrlf", "true"}, {"core.eol", "crlf"}, {"include.path", filepath.Join(r.dir, "extra.cfg")},
		{"core.alternateRefsCommand", touch}, {"core.sshCommand", touch},
	} {
		r.git("config", kv[0], kv[1])
	}
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "extra.cfg"), []byte("[core]\n\tfsmonitor = "+touch+"\n"), 0o644))
	for _, h := range []string{"post-checkout", "pre-commit", "reference-transaction", "post-index-change"} {
		r.write(filepath.Join("hooks", h), "#!/bin/sh\ntouch "+marker+"\n", 0o755)
		r.write(filepath.Join(".git", "hooks", h), "#!/bin/sh\ntouch "+marker+"\n", 0o755)
	}
	// A system-like config reachable through the worker's own environment
	// must not be honoured either.
	// The test bites: plain git archive runs the filter.
	_ = exec.Command("git", "-C", r.dir, "archive", "-o", filepath.Join(rt, "out.tar"), "main").Run() // fails: the filter is no real process filter
	_, err := os.Stat(marker)
	require.NoError(t, err, "git archive should have run the filter")
	require.NoError(t, os.Remove(marker))

	t.Setenv("GIT_CONFIG_COUNT", "1")
	t.Setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
	t.Setenv("GIT_CONFIG_VALUE_0", touch)
	t.Setenv("GIT_DIR", filepath.Join(rt, "elsewhere"))

	im := importer(t, gitsource.Config{Roots: []string{rt}})
	files, err := export(t, im, r.dir, "main", 1<<20)
	require.NoError(t, err)
	require.Equal(t, "commit $Format:%H$\n", files["subst.txt"].data, "export-subst not applied")
	require.Equal(t, "still here\n", files["ignored.txt"].data, "export-ignore not applied")
	require.Equal(t, "plain bytes\r\n", files["plain.txt"].data, "no eol conversion")
	require.Contains(t, files, ".gitattributes")
	_, err = os.Stat(marker)
	require.True(t, os.IsNotExist(err), "a repository-configured command ran on the worker")
}

func TestReplaceRefsAndGraftsIgnored(t *testing.T) {
	rt := root(t)
	r := newRepo(t, rt)
	r.write("a.txt", "genuine\n", 0o644)
	r.commit("one")
	blob := r.git("rev-parse", "HEAD:a.txt")
	r.write("evil.txt", "replaced\n", 0o644)
	evil := r.git("hash-object", "-w", "evil.txt")
	require.NoError(t, os.Remove(filepath.Join(r.dir, "evil.txt")))
	r.git("replace", blob, evil)
	require.Equal(t, "replaced", r.git("cat-file", "-p", "HEAD:a.txt"), "plain git honours the replacement")

	im := importer(t, gitsource.Config{Roots: []string{rt}})
	files, err := export(t, im, r.dir, "main", 1<<20)
	require.NoError(t, err)
	require.Equal(t, "genuine\n", files["a.txt"].data)

	// A graft that cuts history: plain git then has no main~1.
	r.write("a.txt", "second\n", 0o644)
	head := r.commit("two")
	require.NoError(t, os.MkdirAll(filepath.Join(r.dir, ".git", "info"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, ".git", "info", "grafts"), []byte(head+"\n"), 0o644))
	require.Error(t, exec.Command("git", "-C", r.dir, "-c", "advice.graftFileDeprecated=false", "rev-parse", "--verify", "-q", "main~1").Run(),
		"plain git honours the graft")
	files, err = export(t, im, r.dir, "main~1", 1<<20)
	require.NoError(t, err, "grafts ignored")
	require.Equal(t, "genuine\n", files["a.txt"].data)
}

// TestPromisorRemoteNeverFetched: a partial-clone configuration whose
// "remote" is a command; the missing object must be an error, not a fetch.
func TestPromisorRemoteNeverFetched(t *testing.T) {
	rt := root(t)
	r := newRepo(t, rt)
	r.write("a.txt", "a\n", 0o644)
	r.write("b.txt", "b\n", 0o644)
	r.commit("one")
	marker := filepath.Join(rt, "fetched")
	r.git("config", "core.repositoryformatversion", "1")
	r.git("config", "extensions.partialClone", "origin")
	r.git("config", "remote.origin.promisor", "true")
	r.git("config", "remote.origin.url", "ext::sh -c touch% "+marker)
	r.git("config", "remote.origin.uploadpack", "touch "+marker+";")
	r.git("config", "protocol.ext.allow", "always")
	blob := r.git("rev-parse", "HEAD:b.txt")
	require.NoError(t, os.Remove(filepath.Join(r.dir, ".git", "objects", blob[:2], blob[2:])))
	// The test bites: plain git lazily fetches through the promisor remote.
	_ = exec.Command("git", "-C", r.dir, "cat-file", "-p", blob).Run()
	_, err := os.Stat(marker)
	require.NoError(t, err, "plain git should have contacted the promisor remote")
	require.NoError(t, os.Remove(marker))

	im := importer(t, gitsource.Config{Roots: []string{rt}})
	_, err = export(t, im, r.dir, "main", 1<<20)
	require.Error(t, err, "a missing object is an error")
	_, statErr := os.Stat(marker)
	require.True(t, os.IsNotExist(statErr), "the promisor remote was contacted")
}

func TestRepositoryLocation(t *testing.T) {
	rt := root(t)
	other := root(t)
	r := newRepo(t, rt)
	r.write("a", "a", 0o644)
	r.commit("one")
	outside := newRepo(t, other)
	outside.write("a", "a", 0o644)
	outside.commit("one")
	im := importer(t, gitsource.Config{Roots: []string{rt}})
	policy := func(repoPath, want string) {
		t.Helper()
		_, err := im.Prepare(t.Context(), exechost.GitSource{RepositoryPath: repoPath, Revision: "main"}, 1<<20)
		var pe *exechost.PolicyError
		require.ErrorAs(t, err, &pe, repoPath)
		require.Contains(t, pe.Error(), want)
	}

	t.Run("no root configured", func(t *testing.T) {
		_, err := importer(t, gitsource.Config{}).Prepare(t.Context(), exechost.GitSource{RepositoryPath: r.dir, Revision: "main"}, 1<<20)
		require.ErrorIs(t, err, exechost.ErrPolicy)
		require.Contains(t, err.Error(), "--git-root")
	})
	t.Run("outside the root", func(t *testing.T) { policy(outside.dir, "not under a repository root") })
	t.Run("prefix is not containment", func(t *testing.T) {
		sib := rt + "-sibling"
		require.NoError(t, os.MkdirAll(sib, 0o755))
		t.Cleanup(func() { os.RemoveAll(sib) })
		policy(sib, "not under a repository root")
	})
	t.Run("dot-dot", func(t *testing.T) { policy(rt+"/../"+filepath.Base(other), "clean absolute path") })
	t.Run("relative", func(t *testing.T) { policy("repo", "clean absolute path") })
	t.Run("symlink to a repo outside", func(t *testing.T) {
		l := filepath.Join(rt, "link-out")
		require.NoError(t, os.Symlink(outside.dir, l))
		policy(l, "symlink")
	})
	t.Run("symlink to a repo inside", func(t *testing.T) {
		l := filepath.Join(rt, "link-in")
		require.NoError(t, os.Symlink(r.dir, l))
		policy(l, "symlink")
	})
	t.Run("symlinked parent directory", func(t *testing.T) {
		l := filepath.Join(rt, "parent-link")
		require.NoError(t, os.Symlink(filepath.Dir(outside.dir), l))
		policy(filepath.Join(l, filepath.Base(outside.dir)), "symlink")
	})
	t.Run("symlinked .git", func(t *testing.T) {
		d := filepath.Join(rt, "dotgit-link")
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.Symlink(filepath.Join(outside.dir, ".git"), filepath.Join(d, ".git")))
		policy(d, ".git is not a directory")
	})
	t.Run("gitfile", func(t *testing.T) {
		d := filepath.Join(rt, "gitfile")
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, ".git"), []byte("gitdir: "+filepath.Join(outside.dir, ".git")+"\n"), 0o644))
		policy(d, ".git is not a directory")
	})
	t.Run("symlinked objects", func(t *testing.T) {
		s := newRepo(t, rt)
		require.NoError(t, os.RemoveAll(filepath.Join(s.dir, ".git", "objects")))
		require.NoError(t, os.Symlink(filepath.Join(outside.dir, ".git", "objects"), filepath.Join(s.dir, ".git", "objects")))
		policy(s.dir, "objects is a symlink")
	})
	t.Run("symlinked ref", func(t *testing.T) {
		s := newRepo(t, rt)
		require.NoError(t, os.MkdirAll(filepath.Join(s.dir, ".git", "refs", "heads"), 0o755))
		require.NoError(t, os.Symlink(filepath.Join(outside.dir, ".git", "refs", "heads", "main"), filepath.Join(s.dir, ".git", "refs", "heads", "main")))
		policy(s.dir, "is a symlink")
	})
	t.Run("alternates", func(t *testing.T) {
		s := newRepo(t, rt)
		require.NoError(t, os.MkdirAll(filepath.Join(s.dir, ".git", "objects", "info"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(s.dir, ".git", "objects", "info", "alternates"),
			[]byte(filepath.Join(outside.dir, ".git", "objects")+"\n"), 0o644))
		policy(s.dir, "alternates")
	})
	t.Run("missing repository", func(t *testing.T) {
		_, err := im.Prepare(t.Context(), exechost.GitSource{RepositoryPath: filepath.Join(rt, "nope"), Revision: "main"}, 1<<20)
		require.ErrorIs(t, err, exechost.ErrNotFound)
		require.ErrorIs(t, err, exechost.ErrPolicy, "non-retryable")
	})
	t.Run("not a repository", func(t *testing.T) {
		d := filepath.Join(rt, "plain")
		require.NoError(t, os.MkdirAll(d, 0o755))
		_, err := im.Prepare(t.Context(), exechost.GitSource{RepositoryPath: d, Revision: "main"}, 1<<20)
		require.ErrorIs(t, err, exechost.ErrNotFound)
	})
	t.Run("missing revision", func(t *testing.T) {
		_, err := im.Prepare(t.Context(), exechost.GitSource{RepositoryPath: r.dir, Revision: "no-such-branch"}, 1<<20)
		require.ErrorIs(t, err, exechost.ErrNotFound)
		require.ErrorIs(t, err, exechost.ErrPolicy, "non-retryable")
		_, err = im.Prepare(t.Context(), exechost.GitSource{RepositoryPath: r.dir, Revision: strings.Repeat("e", 40)}, 1<<20)
		require.ErrorIs(t, err, exechost.ErrNotFound)
	})
	t.Run("bare repository", func(t *testing.T) {
		b := filepath.Join(rt, "bare.git")
		r.git("clone", "-q", "--bare", r.dir, b)
		_, err := export(t, im, b, "main", 1<<20)
		require.NoError(t, err)
	})
}

func TestRootConfig(t *testing.T) {
	rt := root(t)
	l := filepath.Join(root(t), "root-link")
	require.NoError(t, os.Symlink(rt, l))
	for _, bad := range []string{"relative", l, filepath.Join(rt, "missing")} {
		_, err := gitsource.New(gitsource.Config{Roots: []string{bad}})
		require.Error(t, err, bad)
	}
}

func TestBudget(t *testing.T) {
	rt := root(t)
	r := newRepo(t, rt)
	for i := range 20 {
		r.write(fmt.Sprintf("d%d/f%d.txt", i%3, i), "x", 0o644)
	}
	r.write("big.bin", strings.Repeat("b", 4096), 0o644)
	r.commit("many")

	t.Run("entries", func(t *testing.T) {
		im := importer(t, gitsource.Config{Roots: []string{rt}, MaxEntries: 10})
		_, err := export(t, im, r.dir, "main", 1<<20)
		var pe *exechost.PolicyError
		require.ErrorAs(t, err, &pe)
		require.Contains(t, pe.Reason, "more than 10 entries")
		_, err = export(t, importer(t, gitsource.Config{Roots: []string{rt}, MaxEntries: 21}), r.dir, "main", 1<<20)
		require.NoError(t, err, "exactly at the cap")
	})
	t.Run("bytes", func(t *testing.T) {
		im := importer(t, gitsource.Config{Roots: []string{rt}})
		_, err := export(t, im, r.dir, "main", 4096)
		var pe *exechost.PolicyError
		require.ErrorAs(t, err, &pe)
		require.Contains(t, pe.Reason, "disk limit")
		_, err = export(t, im, r.dir, "main", 4096+20)
		require.NoError(t, err, "exactly at the limit")
	})
	t.Run("time", func(t *testing.T) {
		im := importer(t, gitsource.Config{Roots: []string{rt}, Timeout: 1})
		_, err := export(t, im, r.dir, "main", 1<<20)
		require.Error(t, err)
	})
}

// TestCraftedTrees: trees git's porcelain would never write, made with
// mktree: names that leave the workspace, .git, duplicates, links out.
func TestCraftedTrees(t *testing.T) {
	rt := root(t)
	r := newRepo(t, rt)
	r.write("seed", "seed", 0o644)
	r.commit("seed")
	blob := r.git("hash-object", "-w", "seed")
	link := func(target string) string {
		p := filepath.Join(rt, "target")
		require.NoError(t, os.WriteFile(p, []byte(target), 0o644))
		return r.git("hash-object", "-w", p)
	}
	mk := func(lines ...string) string {
		p := filepath.Join(rt, "tree.txt")
		require.NoError(t, os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
		cmd := exec.Command("git", "-C", r.dir, "mktree")
		f, err := os.Open(p)
		require.NoError(t, err)
		defer f.Close()
		cmd.Stdin = f
		out, err := cmd.Output()
		require.NoError(t, err)
		tree := strings.TrimSpace(string(out))
		c := exec.Command("git", "-C", r.dir, "commit-tree", "-m", "crafted", tree)
		c.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err = c.Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	sub := mk("100644 blob " + blob + "\tx")
	subTree := r.git("rev-parse", sub+"^{tree}")
	im := importer(t, gitsource.Config{Roots: []string{rt}})
	for name, lines := range map[string][]string{
		"dotdot":        {"100644 blob " + blob + "\t.."},
		"dotgit":        {"100644 blob " + blob + "\t.git"},
		"dotgit-upper":  {"040000 tree " + subTree + "\t.GIT"},
		"duplicate":     {"100644 blob " + blob + "\ta", "100644 blob " + blob + "\ta"},
		"file-and-dir":  {"100644 blob " + blob + "\ta", "040000 tree " + subTree + "\ta"},
		"link-absolute": {"120000 blob " + link("/etc") + "\tl"},
		"link-up":       {"120000 blob " + link("../../etc") + "\tl"},
		"link-dir-file": {"120000 blob " + link(".") + "\ta", "040000 tree " + subTree + "\ta"},
		// b -> . and d -> b/.. : each passes a lexical check, together
		// they resolve to the workspace's parent (the chain rule).
		"link-chain": {"120000 blob " + link(".") + "\tb", "120000 blob " + link("b/..") + "\td"},
		"link-nul":   {"120000 blob " + link("a\x00b") + "\tl"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := export(t, im, r.dir, mk(lines...), 1<<20)
			require.ErrorIs(t, err, exechost.ErrPolicy)
			t.Log(err)
		})
	}
	t.Run("submodule is an empty directory", func(t *testing.T) {
		files, err := export(t, im, r.dir, mk("160000 commit "+strings.Repeat("1", 40)+"\tmod", "100644 blob "+blob+"\tf"), 1<<20)
		require.NoError(t, err)
		require.Equal(t, map[string]entry{"mod/": {typ: tar.TypeDir, mode: 0o755}, "f": {typ: tar.TypeReg, mode: 0o644, data: "seed"}}, files)
	})
}

func TestSHA256Repository(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	rt := root(t)
	dir := filepath.Join(rt, "s256")
	out, err := exec.Command("git", "init", "-q", "--object-format=sha256", dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	r := &repo{t: t, root: rt, dir: dir}
	r.write("a", "sha256 content", 0o644)
	c := r.commit("one")
	require.Len(t, c, 64)
	files, err := export(t, importer(t, gitsource.Config{Roots: []string{rt}}), dir, c[:12], 1<<20)
	require.NoError(t, err)
	require.Equal(t, "sha256 content", files["a"].data)
}

func TestNoLeftoverPrivateDirs(t *testing.T) {
	rt := root(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	r := newRepo(t, rt)
	r.write("a", "a", 0o644)
	r.commit("one")
	im := importer(t, gitsource.Config{Roots: []string{rt}})
	_, err := export(t, im, r.dir, "main", 1<<20)
	require.NoError(t, err)
	_, err = export(t, im, r.dir, "no-such", 1<<20)
	require.Error(t, err)
	tree, err := im.Prepare(t.Context(), exechost.GitSource{RepositoryPath: r.dir, Revision: "main"}, 1<<20)
	require.NoError(t, err)
	rc, err := tree.Open(t.Context())
	require.NoError(t, err)
	require.NoError(t, rc.Close(), "closed before reading")
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, left)
}

var _ = bytes.Buffer{}
