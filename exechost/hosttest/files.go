package hosttest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/exechost"
)

// Encode is the canonical byte form of a set of files (sorted by path): what
// a Fake checkpoint's SizeBytes and SHA256 are computed over, and what
// tests can search for leaked content.
func Encode(files map[string]File) []byte {
	var b bytes.Buffer
	for _, p := range slices.Sorted(maps.Keys(files)) {
		f := files[p]
		fmt.Fprintf(&b, "%s\x00%o\x00%d\x00", p, f.Mode.Perm(), len(f.Data))
		if f.Symlink != "" {
			fmt.Fprintf(&b, "->%s\x00", f.Symlink)
		}
		b.Write(f.Data)
	}
	return b.Bytes()
}

func digestFiles(files map[string]File) (size int64, sum string) {
	b := Encode(files)
	h := sha256.Sum256(b)
	return int64(len(b)), hex.EncodeToString(h[:])
}

// gitFiles is the default git import: the regular files of one commit, via
// `git archive` like the Docker host (no worktree, no .git). Symlinks and
// other entries are skipped; the Fake has only regular files.
func gitFiles(ctx context.Context, src exechost.GitSource) (map[string]File, error) {
	env := append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_OPTIONAL_LOCKS=0")
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", "-C", src.RepositoryPath, "rev-parse", "--verify", "--quiet",
		"--end-of-options", src.Revision+"^{commit}")
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 {
			return nil, fmt.Errorf("git revision %s in %s: %w", src.Revision, src.RepositoryPath, exechost.ErrNotFound)
		}
		return nil, fmt.Errorf("git rev-parse %s in %s: %w: %s", src.Revision, src.RepositoryPath, err, strings.TrimSpace(stderr.String()))
	}
	commit := strings.TrimSpace(stdout.String())
	stdout.Reset()
	stderr.Reset()
	cmd = exec.CommandContext(ctx, "git", "-C", src.RepositoryPath, "archive", "--format=tar", commit)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("git archive %s in %s: %w: %s", commit, src.RepositoryPath, err, strings.TrimSpace(stderr.String()))
	}
	files := map[string]File{}
	tr := tar.NewReader(&stdout)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("git archive %s: %w", commit, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		p, err := Clean(h.Name)
		if err != nil {
			return nil, &exechost.PolicyError{Field: "workspace.git", Reason: err.Error()}
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("git archive %s: %w", commit, err)
		}
		files[p] = File{Data: data, Mode: fs.FileMode(h.Mode).Perm()}
	}
}
