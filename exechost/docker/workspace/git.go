package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker/policy"
)

// ErrRevisionNotFound: the revision does not name a commit of the
// repository. It matches exechost.ErrNotFound.
var ErrRevisionNotFound = fmt.Errorf("git revision %w", exechost.ErrNotFound)

// gitEnv keeps git from prompting or reading system-wide configuration.
func gitEnv() []string {
	return append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_OPTIONAL_LOCKS=0")
}

// ResolveRevision turns rev into a full commit ID. Option-like revisions are
// refused before git sees them, and --end-of-options makes sure git never
// reads rev as an option anyway.
func ResolveRevision(ctx context.Context, repo, rev string) (string, error) {
	if err := policy.CheckRevision(rev); err != nil {
		return "", &exechost.PolicyError{Field: "workspace.git.revision", Reason: err.Error()}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	cmd.Env, cmd.Stdout, cmd.Stderr = gitEnv(), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 {
			return "", fmt.Errorf("%s in %s: %w", rev, repo, ErrRevisionNotFound)
		}
		return "", fmt.Errorf("git rev-parse %s in %s: %w: %s", rev, repo, err, strings.TrimSpace(stderr.String()))
	}
	commit := strings.TrimSpace(stdout.String())
	if len(commit) != 40 && len(commit) != 64 {
		return "", fmt.Errorf("git rev-parse %s in %s: unexpected output %q", rev, repo, commit)
	}
	return commit, nil
}

// GitArchive streams `git archive --format=tar <commit>` of an already
// resolved commit. Close stops git if it is still running. A git failure
// surfaces as the reader's final error, never as a silent short stream.
func GitArchive(ctx context.Context, repo, commit string) (io.ReadCloser, error) {
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "archive", "--format=tar", commit)
	cmd.Env = gitEnv()
	stderr := &bytes.Buffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("git archive: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("git archive: %w", err)
	}
	return &cmdReader{cmd: cmd, out: out, stderr: stderr}, nil
}

type cmdReader struct {
	cmd     *exec.Cmd
	out     io.ReadCloser
	stderr  *bytes.Buffer
	once    sync.Once
	waitErr error
}

func (c *cmdReader) wait() error {
	c.once.Do(func() {
		if err := c.cmd.Wait(); err != nil {
			c.waitErr = fmt.Errorf("git archive: %w: %s", err, strings.TrimSpace(c.stderr.String()))
		}
	})
	return c.waitErr
}

func (c *cmdReader) Read(p []byte) (int, error) {
	n, err := c.out.Read(p)
	if errors.Is(err, io.EOF) {
		if werr := c.wait(); werr != nil {
			return n, werr
		}
	}
	return n, err
}

func (c *cmdReader) Close() error {
	if c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Kill()
	}
	_ = c.wait()
	return nil
}
