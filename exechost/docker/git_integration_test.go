//go:build integration

package docker_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/exechost/gitsource"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return strings.TrimSpace(string(out))
}

// gitEnv is setup's environment with a host whose only git root is root.
func gitEnv(t *testing.T, root string) *env {
	t.Helper()
	e := setup(t)
	h, err := docker.New(docker.Options{Client: e.c, Store: e.store, KillGrace: time.Second,
		Git: gitsource.Config{Roots: []string{root}}})
	require.NoError(t, err)
	e.host = h
	return e
}

func TestGitImport(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	e := gitEnv(t, root)
	repo := filepath.Join(root, "repo")
	require.NoError(t, os.MkdirAll(repo, 0o755))
	git(t, repo, "init", "-q", "-b", "main")
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "src", "main.txt"), []byte("v1\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "build.sh"), []byte("#!/bin/sh\necho built\n"), 0o755))
	require.NoError(t, os.Symlink("src/main.txt", filepath.Join(repo, "current")))
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-q", "-m", "one")
	git(t, repo, "tag", "v1")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "src", "main.txt"), []byte("v2\n"), 0o644))
	git(t, repo, "commit", "-q", "-am", "two")

	x, _ := e.provision(t, func(r *exechost.ProvisionRequest) {
		r.Workspace.Git = &exechost.GitSource{RepositoryPath: repo, Revision: "v1"}
	})
	res := e.sh(t, x.ExecutionID, `cat src/main.txt; ./build.sh; readlink current; ls -A; stat -c '%u' src/main.txt`)
	require.Equal(t, "v1\nbuilt\nsrc/main.txt\nbuild.sh\ncurrent\nsrc\n65532\n", string(res.Stdout), "no .git, owned by the sandbox user")

	t.Run("nonexistent revision", func(t *testing.T) {
		req := exechost.ProvisionRequest{ExecutionID: newID(t), Image: e.base, Resources: limits(), Labels: testLabels,
			Workspace: exechost.Workspace{Git: &exechost.GitSource{RepositoryPath: repo, Revision: "no-such-branch"}}}
		_, err := e.host.Provision(t.Context(), req)
		require.ErrorIs(t, err, exechost.ErrNotFound)
		e.requireGone(t, req.ExecutionID)
	})
	t.Run("no git root configured", func(t *testing.T) {
		plain := setup(t) // a host without --git-root
		req := exechost.ProvisionRequest{ExecutionID: newID(t), Image: e.base, Resources: limits(), Labels: testLabels,
			Workspace: exechost.Workspace{Git: &exechost.GitSource{RepositoryPath: repo, Revision: "v1"}}}
		_, err := plain.host.Provision(t.Context(), req)
		require.ErrorIs(t, err, exechost.ErrPolicy)
		require.Contains(t, err.Error(), "--git-root")
		plain.requireGone(t, req.ExecutionID)
	})
	t.Run("option-like revision", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "x")
		req := exechost.ProvisionRequest{ExecutionID: newID(t), Image: e.base, Resources: limits(), Labels: testLabels,
			Workspace: exechost.Workspace{Git: &exechost.GitSource{RepositoryPath: repo, Revision: "--output=" + out}}}
		_, err := e.host.Provision(t.Context(), req)
		require.ErrorIs(t, err, exechost.ErrPolicy)
		e.requireGone(t, req.ExecutionID)
		_, statErr := os.Stat(out)
		require.True(t, os.IsNotExist(statErr))
	})
}
