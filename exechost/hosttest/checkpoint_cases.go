package hosttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
)

func (s *suite) checkpointSeeds(t *testing.T) {
	x := s.provision(t, nil)
	s.run(t, x.ExecutionID, Cmd.Write("a.txt", "one"))
	s.run(t, x.ExecutionID, Cmd.Write("deep/er/b.txt", "two"))
	ck, err := s.h.Host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{Reason: "contract"})
	require.NoError(t, err)
	require.NotEmpty(t, ck.CheckpointID)
	require.Equal(t, x.ExecutionID, ck.ExecutionID)
	require.Equal(t, x.ImageDigest, ck.ImageDigest)
	require.Positive(t, ck.SizeBytes)
	require.Len(t, ck.SHA256, 64)
	require.False(t, ck.CreatedAt.IsZero())

	// The checkpoint is a snapshot: later changes to the source do not leak in.
	s.run(t, x.ExecutionID, Cmd.Write("a.txt", "changed"))
	s.run(t, x.ExecutionID, Cmd.Write("later.txt", "later"))

	y := s.provision(t, func(r *exechost.ProvisionRequest) {
		r.Workspace.Checkpoints = []exechost.CheckpointID{ck.CheckpointID}
	})
	require.Equal(t, "one", s.run(t, y.ExecutionID, Cmd.Cat("a.txt")))
	require.Equal(t, "two", s.run(t, y.ExecutionID, Cmd.Cat("deep/er/b.txt")))
	res := s.exec(t, y.ExecutionID, exechost.ExecRequest{Command: Cmd.Cat("later.txt")})
	require.NotEqual(t, 0, res.ExitCode, "a file written after the checkpoint is not in it")

	// And the new sandbox's writes do not change the checkpoint or the source.
	s.run(t, y.ExecutionID, Cmd.Write("a.txt", "from-y"))
	require.Equal(t, "changed", s.run(t, x.ExecutionID, Cmd.Cat("a.txt")))
	z := s.provision(t, func(r *exechost.ProvisionRequest) {
		r.Workspace.Checkpoints = []exechost.CheckpointID{ck.CheckpointID}
	})
	require.Equal(t, "one", s.run(t, z.ExecutionID, Cmd.Cat("a.txt")))
}

func (s *suite) layered(t *testing.T) {
	a := s.provision(t, nil)
	b := s.provision(t, nil)
	s.run(t, a.ExecutionID, Cmd.Write("a.txt", "from-a"))
	s.run(t, a.ExecutionID, Cmd.Write("shared.txt", "a"))
	s.run(t, b.ExecutionID, Cmd.Write("b.txt", "from-b"))
	s.run(t, b.ExecutionID, Cmd.Write("shared.txt", "b"))
	ca, err := s.h.Host.Checkpoint(t.Context(), a.ExecutionID, exechost.CheckpointRequest{})
	require.NoError(t, err)
	cb, err := s.h.Host.Checkpoint(t.Context(), b.ExecutionID, exechost.CheckpointRequest{})
	require.NoError(t, err)
	require.NotEqual(t, ca.CheckpointID, cb.CheckpointID)

	for _, tt := range []struct {
		name   string
		layers []exechost.CheckpointID
		shared string
	}{
		{"a then b", []exechost.CheckpointID{ca.CheckpointID, cb.CheckpointID}, "b"},
		{"b then a", []exechost.CheckpointID{cb.CheckpointID, ca.CheckpointID}, "a"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := s.provision(t, func(r *exechost.ProvisionRequest) { r.Workspace.Checkpoints = tt.layers })
			require.Equal(t, "from-a", s.run(t, j.ExecutionID, Cmd.Cat("a.txt")))
			require.Equal(t, "from-b", s.run(t, j.ExecutionID, Cmd.Cat("b.txt")))
			require.Equal(t, tt.shared, s.run(t, j.ExecutionID, Cmd.Cat("shared.txt")), "the later layer wins")
		})
	}
}

func (s *suite) restore(t *testing.T) {
	x := s.provision(t, nil)
	s.run(t, x.ExecutionID, Cmd.Write("state.json", `{"n":1}`))
	ck, err := s.h.Host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{Reason: "handoff"})
	require.NoError(t, err)
	require.NoError(t, s.h.Host.Terminate(t.Context(), x.ExecutionID))

	id := s.newID(t)
	y, err := s.h.Host.Restore(t.Context(), s.restoreReq(ck.CheckpointID, id))
	require.NoError(t, err)
	s.cleanup(t, y.ExecutionID)
	require.Equal(t, id, y.ExecutionID)
	require.Equal(t, ck.ImageDigest, y.ImageDigest)
	require.Equal(t, `{"n":1}`, s.run(t, id, Cmd.Cat("state.json")))
	s.run(t, id, Cmd.Write("state.json", `{"n":2}`))

	// Restore re-runs the whole Provision validation.
	bad := s.h.Resources
	bad.Pids = 0
	res := s.h.Resources
	for name, req := range map[string]exechost.RestoreRequest{
		"missing limit": {CheckpointID: ck.CheckpointID, ExecutionID: s.newID(t), Labels: s.h.Labels, Image: s.h.Image, Resources: &bad},
		"secret env": {CheckpointID: ck.CheckpointID, ExecutionID: s.newID(t), Labels: s.h.Labels, Image: s.h.Image, Resources: &res,
			Env: map[string]string{"SLACK_TOKEN": "x"}},
		"unpinned": {CheckpointID: ck.CheckpointID, ExecutionID: s.newID(t), Labels: s.h.Labels, Image: "busybox:latest", Resources: &res},
		// A manifest's image and resources are never used.
		"no image":     {CheckpointID: ck.CheckpointID, ExecutionID: s.newID(t), Labels: s.h.Labels, Resources: &res},
		"no resources": {CheckpointID: ck.CheckpointID, ExecutionID: s.newID(t), Labels: s.h.Labels, Image: s.h.Image},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := s.h.Host.Restore(t.Context(), req)
			require.ErrorIs(t, err, exechost.ErrPolicy)
			require.False(t, s.exists(t, req.ExecutionID))
		})
	}
}

// restoreReq restores ck with the suite's own image and resources.
func (s *suite) restoreReq(ck exechost.CheckpointID, id exechost.ExecutionID) exechost.RestoreRequest {
	r := s.h.Resources
	return exechost.RestoreRequest{CheckpointID: ck, ExecutionID: id, Image: s.h.Image, Resources: &r, Labels: s.h.Labels}
}

// tampered: a checkpoint whose stored content changed after it was taken
// seeds nothing, through Provision or Restore, and leaves no sandbox.
func (s *suite) tampered(t *testing.T) {
	if s.h.TamperCheckpoint == nil {
		t.Skip("the harness cannot tamper with stored checkpoints")
	}
	x := s.provision(t, nil)
	s.run(t, x.ExecutionID, Cmd.Write("data.txt", strings.Repeat("0123456789", 1000)))
	good, err := s.h.Host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{})
	require.NoError(t, err)
	bad, err := s.h.Host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{})
	require.NoError(t, err)
	require.NoError(t, s.h.TamperCheckpoint(t.Context(), bad.CheckpointID))

	req := s.request(t)
	req.Workspace.Checkpoints = []exechost.CheckpointID{bad.CheckpointID}
	_, err = s.h.Host.Provision(t.Context(), req)
	require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)
	require.False(t, s.exists(t, req.ExecutionID), "a sandbox fed a tampered checkpoint is removed")

	req = s.request(t)
	req.Workspace.Checkpoints = []exechost.CheckpointID{good.CheckpointID, bad.CheckpointID}
	_, err = s.h.Host.Provision(t.Context(), req)
	require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint, "a tampered later layer spoils the whole workspace")
	require.False(t, s.exists(t, req.ExecutionID))

	id := s.newID(t)
	_, err = s.h.Host.Restore(t.Context(), s.restoreReq(bad.CheckpointID, id))
	require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)
	require.False(t, s.exists(t, id))

	// The untouched checkpoint still restores.
	y, err := s.h.Host.Restore(t.Context(), s.restoreReq(good.CheckpointID, s.newID(t)))
	require.NoError(t, err)
	s.cleanup(t, y.ExecutionID)
	require.Equal(t, strings.Repeat("0123456789", 1000), s.run(t, y.ExecutionID, Cmd.Cat("data.txt")))
}

// symlinkChain: links that could lead out of the workspace, alone or in a
// chain, are never checkpointed; links that stay inside are.
func (s *suite) symlinkChain(t *testing.T) {
	for name, links := range map[string][][2]string{
		"b -> . and d -> b/..": {{".", "b"}, {"b/..", "d"}},
		"dot dot after a name": {{"./z/../..", "y/l"}},
		"climbs past the root": {{"../../etc", "a/l"}},
		"absolute":             {{"/etc", "l"}},
	} {
		t.Run(name, func(t *testing.T) {
			x := s.provision(t, nil)
			s.run(t, x.ExecutionID, Cmd.Write("keep.txt", "keep"))
			for _, l := range links {
				s.run(t, x.ExecutionID, Cmd.Symlink(l[0], l[1]))
			}
			_, err := s.h.Host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{})
			require.ErrorIs(t, err, exechost.ErrPolicy)
			var pe *exechost.PolicyError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, exechost.PolicyFieldCheckpointWorkspace, pe.Field)
		})
	}
	x := s.provision(t, nil)
	s.run(t, x.ExecutionID, Cmd.Write("tool/cli.js", "cli"))
	s.run(t, x.ExecutionID, Cmd.Symlink("../../tool/cli.js", "node_modules/.bin/tool"))
	ck, err := s.h.Host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{})
	require.NoError(t, err, "a link that stays inside is checkpointed")
	y := s.provision(t, func(r *exechost.ProvisionRequest) {
		r.Workspace.Checkpoints = []exechost.CheckpointID{ck.CheckpointID}
	})
	require.Equal(t, "cli", s.run(t, y.ExecutionID, Cmd.Cat("node_modules/.bin/tool")))
}

func (s *suite) serialize(t *testing.T) {
	x := s.provision(t, nil)
	done := s.execAsync(t.Context(), x.ExecutionID, exechost.ExecRequest{Command: Cmd.Gated("log", "gate"), Timeout: 2 * time.Minute})
	s.waitStarted(t, x.ExecutionID, "log")

	type ckOutcome struct {
		ck  *exechost.Checkpoint
		err error
	}
	ckDone := make(chan ckOutcome, 1)
	go func() {
		ck, err := s.h.Host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{})
		ckDone <- ckOutcome{ck, err}
	}()
	// Give a host that does not serialise the chance to checkpoint now, in
	// the middle of the command. This window only decides how likely a
	// broken host is caught; a serialising host passes whatever the timing.
	select {
	case o := <-ckDone:
		t.Fatalf("checkpoint finished while an exec was running: %+v", o)
	case <-time.After(s.h.OverlapWindow):
	}
	s.probe(t, x.ExecutionID, Cmd.Write("gate", "open"))
	o := <-done
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode, "stderr: %s", o.res.Stderr)
	ck := <-ckDone
	require.NoError(t, ck.err)

	// The checkpoint saw the finished command, never its middle.
	y := s.provision(t, func(r *exechost.ProvisionRequest) {
		r.Workspace.Checkpoints = []exechost.CheckpointID{ck.ck.CheckpointID}
	})
	require.Equal(t, "start\nend\n", s.run(t, y.ExecutionID, Cmd.Cat("log")))
}

func (s *suite) independent(t *testing.T) {
	a := s.provision(t, nil)
	b := s.provision(t, nil)
	done := s.execAsync(t.Context(), a.ExecutionID, exechost.ExecRequest{Command: Cmd.Gated("log", "gate"), Timeout: 2 * time.Minute})
	s.waitStarted(t, a.ExecutionID, "log")

	// b works while a's command is held.
	s.run(t, b.ExecutionID, Cmd.Write("f", "b"))
	require.Equal(t, "b", s.run(t, b.ExecutionID, Cmd.Cat("f")))
	_, err := s.h.Host.Checkpoint(t.Context(), b.ExecutionID, exechost.CheckpointRequest{})
	require.NoError(t, err)
	select {
	case o := <-done:
		t.Fatalf("a's exec ended before it was released: %+v", o)
	default:
	}

	s.probe(t, a.ExecutionID, Cmd.Write("gate", "open"))
	o := <-done
	require.NoError(t, o.err)
	require.Equal(t, 0, o.res.ExitCode)
	require.Equal(t, "start\nend\n", s.run(t, a.ExecutionID, Cmd.Cat("log")))
}

func (s *suite) secrets(t *testing.T) {
	const secret = "s3cr3t-hosttest-value"
	x := s.provision(t, func(r *exechost.ProvisionRequest) { r.Env = map[string]string{"PLAIN": "p"} })
	res := s.exec(t, x.ExecutionID, exechost.ExecRequest{Command: Cmd.PrintEnv("API_TOKEN"), Secrets: map[string]string{"API_TOKEN": secret}})
	require.Equal(t, 0, res.ExitCode)
	require.Equal(t, secret+"\n", string(res.Stdout), "secrets reach the process environment")
	s.exec(t, x.ExecutionID, exechost.ExecRequest{Command: Cmd.Write("out.txt", "done"), Secrets: map[string]string{"API_TOKEN": secret}})

	res = s.exec(t, x.ExecutionID, exechost.ExecRequest{Command: Cmd.PrintEnv("API_TOKEN")})
	require.Equal(t, 1, res.ExitCode, "a secret belongs to one exec: %s", res.Stdout)

	ck, err := s.h.Host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{})
	require.NoError(t, err)
	if s.h.CheckpointContent != nil {
		content, err := s.h.CheckpointContent(t.Context(), ck.CheckpointID)
		require.NoError(t, err)
		require.NotEmpty(t, content)
		require.NotContains(t, string(content), secret, "a checkpoint holds no credential")
		require.Contains(t, string(content), "done", "the content is the workspace")
	}

	id := s.newID(t)
	y, err := s.h.Host.Restore(t.Context(), s.restoreReq(ck.CheckpointID, id))
	require.NoError(t, err)
	s.cleanup(t, y.ExecutionID)
	require.Equal(t, "done", s.run(t, id, Cmd.Cat("out.txt")))
	for _, name := range []string{"API_TOKEN", "PLAIN"} {
		res := s.exec(t, id, exechost.ExecRequest{Command: Cmd.PrintEnv(name)})
		require.Equal(t, 1, res.ExitCode, "%s came back from a checkpoint: %s", name, res.Stdout)
	}
}

func (s *suite) redact(t *testing.T) {
	const secret = "hosttest-Redact-me-7Qz"
	const other = `quote"d`
	stars := func(v string) string { return strings.Repeat("*", len(v)) }
	redact := []string{secret, "", other}

	// big.txt: occurrences right before, on and after the 32 KiB multiples
	// a streaming host reads in, so one straddles every boundary.
	big := []byte(strings.Repeat("0123456789abcdef", 20<<10)) // 320 KiB
	var at []int
	for k, d := range []int{-len(secret), -len(secret) + 1, -3, 0, 1, 5} {
		at = append(at, (k+1)*32<<10+d)
	}
	at = append(at, 0, 150_001, len(big)-len(secret))
	for _, p := range at {
		copy(big[p:], secret)
	}
	bigWant := strings.ReplaceAll(string(big), secret, stars(secret))
	require.Equal(t, len(at), strings.Count(string(big), secret), "test data: occurrences must not overlap")

	x := s.provision(t, nil)
	s.run(t, x.ExecutionID, Cmd.Write("note.txt", "before "+secret+" after "+other))
	s.run(t, x.ExecutionID, Cmd.Write("clean.txt", "nothing secret"))
	const piece = 100_000 // under the kernel's per-argument limit
	for i := 0; i < len(big); i += piece {
		argv := Cmd.Append("dir/big.txt", string(big[i:min(i+piece, len(big))]))
		s.run(t, x.ExecutionID, argv)
	}
	ck, err := s.h.Host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{Reason: "redact", Redact: redact})
	require.NoError(t, err)
	require.Equal(t, string(big), s.run(t, x.ExecutionID, Cmd.Cat("dir/big.txt")), "redaction touches the checkpoint, not the sandbox")
	if s.h.CheckpointContent != nil {
		content, err := s.h.CheckpointContent(t.Context(), ck.CheckpointID)
		require.NoError(t, err)
		// Not NotContains: a failure would print the whole archive.
		for _, v := range []string{secret, other} {
			require.False(t, strings.Contains(string(content), v), "the stored checkpoint holds a redacted value %q", v)
		}
	}

	id := s.newID(t)
	y, err := s.h.Host.Restore(t.Context(), s.restoreReq(ck.CheckpointID, id))
	require.NoError(t, err)
	s.cleanup(t, y.ExecutionID)
	require.Equal(t, "before "+stars(secret)+" after "+stars(other), s.run(t, id, Cmd.Cat("note.txt")))
	require.Equal(t, "nothing secret", s.run(t, id, Cmd.Cat("clean.txt")))
	got := s.run(t, id, Cmd.Cat("dir/big.txt"))
	require.Len(t, got, len(big), "same length")
	require.True(t, got == bigWant, "dir/big.txt is not the redacted content (first difference at %d)", firstDiff(got, bigWant))

	t.Run("entry named after a value", func(t *testing.T) {
		n := s.provision(t, nil)
		s.run(t, n.ExecutionID, Cmd.Write("ok.txt", "fine"))
		s.run(t, n.ExecutionID, Cmd.Write("sub/leak-"+secret+".txt", "x"))
		_, err := s.h.Host.Checkpoint(t.Context(), n.ExecutionID, exechost.CheckpointRequest{Redact: redact})
		require.ErrorIs(t, err, exechost.ErrPolicy)
		var pe *exechost.PolicyError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, exechost.PolicyFieldRedact, pe.Field)
		require.NotContains(t, err.Error(), secret, "the error never carries the name")
		// The refusal leaves the execution usable (and a checkpoint that
		// does not redact that value is allowed).
		require.Equal(t, "fine", s.run(t, n.ExecutionID, Cmd.Cat("ok.txt")))
		plain, err := s.h.Host.Checkpoint(t.Context(), n.ExecutionID, exechost.CheckpointRequest{Redact: []string{other}})
		require.NoError(t, err)

		// A sandbox provisioned with that name keeps it: the name is stored
		// already and was not the new step's doing. Content is still
		// redacted, and a new secret-named entry is still refused.
		m := s.provision(t, func(r *exechost.ProvisionRequest) {
			r.Workspace.Checkpoints = []exechost.CheckpointID{plain.CheckpointID}
		})
		s.run(t, m.ExecutionID, Cmd.Write("sub/leak-"+secret+".txt", "now "+secret))
		ck, err := s.h.Host.Checkpoint(t.Context(), m.ExecutionID, exechost.CheckpointRequest{Redact: redact})
		require.NoError(t, err)
		z := s.provision(t, func(r *exechost.ProvisionRequest) {
			r.Workspace.Checkpoints = []exechost.CheckpointID{ck.CheckpointID}
		})
		require.Equal(t, "now "+stars(secret), s.run(t, z.ExecutionID, Cmd.Cat("sub/leak-"+secret+".txt")))
		s.run(t, m.ExecutionID, Cmd.Write("new-"+secret, "x"))
		_, err = s.h.Host.Checkpoint(t.Context(), m.ExecutionID, exechost.CheckpointRequest{Redact: redact})
		require.ErrorIs(t, err, exechost.ErrPolicy)
	})
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func (s *suite) gitWorkspace(t *testing.T) {
	repo := s.gitRepo(t).dir
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=hosttest", "-c", "user.email=hosttest@example.invalid",
			"-c", "commit.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "src", "main.go"), []byte("package main\n"), 0o644))
	git("add", ".")
	git("commit", "-q", "-m", "first")
	git("tag", "v1")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "src", "main.go"), []byte("package main // v2\n"), 0o644))
	git("commit", "-q", "-am", "second")

	x := s.provision(t, func(r *exechost.ProvisionRequest) {
		r.Workspace.Git = &exechost.GitSource{RepositoryPath: repo, Revision: "v1"}
	})
	require.Equal(t, "package main\n", s.run(t, x.ExecutionID, Cmd.Cat("src/main.go")), "the requested revision, not the worktree")
	res := s.exec(t, x.ExecutionID, exechost.ExecRequest{Command: Cmd.Cat(".git/HEAD")})
	require.NotEqual(t, 0, res.ExitCode, "no .git in the workspace")

	req := s.request(t)
	req.Workspace.Git = &exechost.GitSource{RepositoryPath: repo, Revision: "no-such-branch"}
	_, err := s.h.Host.Provision(t.Context(), req)
	require.ErrorIs(t, err, exechost.ErrNotFound)
	require.False(t, s.exists(t, req.ExecutionID))
}
