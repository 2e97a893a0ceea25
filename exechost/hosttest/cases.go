package hosttest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
)

func (s *suite) lifecycle(t *testing.T) {
	req := s.request(t)
	req.Env = map[string]string{"PLAIN": "from-provision"}
	before := time.Now()
	x, err := s.h.Host.Provision(t.Context(), req)
	require.NoError(t, err)
	s.cleanup(t, x.ExecutionID)
	require.Equal(t, req.ExecutionID, x.ExecutionID)
	require.NotEmpty(t, x.ImageDigest)
	require.True(t, x.Deadline.After(before), "deadline %s is in the past", x.Deadline)
	require.False(t, x.Deadline.After(time.Now().Add(req.Resources.Runtime)), "deadline %s beyond the runtime", x.Deadline)
	require.True(t, s.exists(t, x.ExecutionID))

	id := x.ExecutionID
	s.run(t, id, Cmd.Write("dir/sub/a.txt", "hello"))
	require.Equal(t, "hello", s.run(t, id, Cmd.Cat("dir/sub/a.txt")))
	s.run(t, id, Cmd.Append("dir/sub/a.txt", " world"))
	require.Equal(t, "hello world", s.run(t, id, Cmd.Cat("dir/sub/a.txt")))

	// A non-zero exit is a result, not an error, and the sandbox lives on.
	res := s.exec(t, id, exechost.ExecRequest{Command: Cmd.Exit(3, "boom")})
	require.Equal(t, 3, res.ExitCode)
	require.Equal(t, "boom", string(res.Stderr))
	require.False(t, res.TimedOut || res.Truncated || res.Aborted || res.OOMKilled)
	res = s.exec(t, id, exechost.ExecRequest{Command: Cmd.Cat("missing")})
	require.NotEqual(t, 0, res.ExitCode)

	require.Equal(t, "from stdin", string(s.exec(t, id, exechost.ExecRequest{Command: Cmd.Echo(), Stdin: []byte("from stdin")}).Stdout), "stdin reaches the process")
	require.Equal(t, "from-provision\n", s.run(t, id, Cmd.PrintEnv("PLAIN")), "provision env reaches every exec")
	res = s.exec(t, id, exechost.ExecRequest{Command: Cmd.PrintEnv("STEP"), Env: map[string]string{"STEP": "7"}})
	require.Equal(t, "7\n", string(res.Stdout))
	res = s.exec(t, id, exechost.ExecRequest{Command: Cmd.PrintEnv("STEP")})
	require.Equal(t, 1, res.ExitCode, "exec env belongs to one exec")

	require.NoError(t, s.h.Host.Terminate(t.Context(), id))
	s.requireGone(t, id)
	s.requireTerminated(t, id)
}

func (s *suite) provisionIdempotent(t *testing.T) {
	req := s.request(t)
	x, err := s.h.Host.Provision(t.Context(), req)
	require.NoError(t, err)
	s.cleanup(t, x.ExecutionID)
	s.run(t, x.ExecutionID, Cmd.Write("keep", "1"))

	// A retried Provision of a live execution returns it unchanged...
	again, err := s.h.Host.Provision(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, x, again)
	require.Equal(t, "1", s.run(t, x.ExecutionID, Cmd.Cat("keep")), "the retry did not replace the sandbox")

	// ...but the same ID with another image is refused.
	other := req
	other.Image = s.h.UnknownImage
	_, err = s.h.Host.Provision(t.Context(), other)
	require.ErrorIs(t, err, exechost.ErrPolicy)
	require.Equal(t, "1", s.run(t, x.ExecutionID, Cmd.Cat("keep")))

	// An ended ID may be provisioned afresh.
	require.NoError(t, s.h.Host.Terminate(t.Context(), x.ExecutionID))
	y, err := s.h.Host.Provision(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, x.ExecutionID, y.ExecutionID)
	res := s.exec(t, y.ExecutionID, exechost.ExecRequest{Command: Cmd.Cat("keep")})
	require.NotEqual(t, 0, res.ExitCode, "a fresh sandbox starts empty")
}

func (s *suite) provisionPolicy(t *testing.T) {
	zero := func(f func(*exechost.ResourceLimits)) func(*exechost.ProvisionRequest) {
		return func(r *exechost.ProvisionRequest) { f(&r.Resources) }
	}
	tests := []struct {
		name   string
		mutate func(*exechost.ProvisionRequest)
	}{
		{"unpinned image", func(r *exechost.ProvisionRequest) { r.Image = "busybox:latest" }},
		{"empty image", func(r *exechost.ProvisionRequest) { r.Image = "" }},
		{"bridge network", func(r *exechost.ProvisionRequest) { r.Network = "bridge" }},
		{"host network", func(r *exechost.ProvisionRequest) { r.Network = "host" }},
		// Egress: any host must refuse these before creating anything.
		{"egress network without policy", func(r *exechost.ProvisionRequest) { r.Network = exechost.NetworkEgress }},
		{"egress policy on network none", func(r *exechost.ProvisionRequest) { r.Egress = egressPolicy("api.example.com", nil) }},
		{"egress to an IP literal", egress("10.0.0.1", nil)},
		{"egress to an IPv6 literal", egress("[::1]", nil)},
		{"egress to an inet_aton address", egress("0x7f.1", nil)},
		{"egress to bare wildcard", egress("*", nil)},
		{"egress to a wildcard TLD", egress("*.com", nil)},
		{"egress with a trailing dot", egress("api.example.com.", nil)},
		{"egress header with CRLF", egress("api.example.com", map[string]string{"Authorization": "Bearer x\r\nX-Evil: 1"})},
		{"egress reserved header", egress("api.example.com", map[string]string{"Host": "other.example.com"})},
		{"egress proxy header", egress("api.example.com", map[string]string{"Proxy-Authorization": "x"})},
		{"egress without byte budget", func(r *exechost.ProvisionRequest) {
			r.Network, r.Egress = exechost.NetworkEgress, egressPolicy("api.example.com", nil)
			r.Egress.MaxBytes = 0
		}},
		{"egress with no rules", func(r *exechost.ProvisionRequest) {
			r.Network, r.Egress = exechost.NetworkEgress, &exechost.EgressPolicy{MaxBytes: 1 << 20}
		}},
		{"secret env", func(r *exechost.ProvisionRequest) { r.Env = map[string]string{"GITHUB_TOKEN": "x"} }},
		{"camel-case secret env", func(r *exechost.ProvisionRequest) { r.Env = map[string]string{"openaiApiKey": "x"} }},
		{"password env", func(r *exechost.ProvisionRequest) { r.Env = map[string]string{"DB_PASSWORD": "x"} }},
		{"dashed secret env", func(r *exechost.ProvisionRequest) { r.Env = map[string]string{"api-key": "x"} }},
		{"loader env", func(r *exechost.ProvisionRequest) { r.Env = map[string]string{"LD_PRELOAD": "/workspace/x.so"} }},
		{"lower-case loader env", func(r *exechost.ProvisionRequest) { r.Env = map[string]string{"ld_library_path": "/workspace"} }},
		{"PATH env", func(r *exechost.ProvisionRequest) { r.Env = map[string]string{"PATH": "/workspace/bin"} }},
		{"runtime injector env", func(r *exechost.ProvisionRequest) {
			r.Env = map[string]string{"NODE_OPTIONS": "--require /workspace/x.js"}
		}},
		{"GPU device env", func(r *exechost.ProvisionRequest) { r.Env = map[string]string{"NVIDIA_VISIBLE_DEVICES": "all"} }},
		{"GPU device list smuggled in an ID", func(r *exechost.ProvisionRequest) {
			r.Resources.GPUs, r.Resources.GPUDevices = 1, []string{"0,1"}
		}},
		{"credential-shaped env value", func(r *exechost.ProvisionRequest) {
			r.Env = map[string]string{"T0KEN": "ghp_" + strings.Repeat("a", 36)}
		}},
		{"private key env value", func(r *exechost.ProvisionRequest) {
			r.Env = map[string]string{"CFG": "-----BEGIN RSA PRIVATE KEY-----"}
		}},
		{"tag plus digest image", func(r *exechost.ProvisionRequest) {
			r.Image = "busybox:1.36@sha256:" + strings.Repeat("ab", 32)
		}},
		{"no cpu", zero(func(l *exechost.ResourceLimits) { l.NanoCPUs = 0 })},
		{"no memory", zero(func(l *exechost.ResourceLimits) { l.MemoryBytes = 0 })},
		{"no disk", zero(func(l *exechost.ResourceLimits) { l.DiskBytes = 0 })},
		{"no pids", zero(func(l *exechost.ResourceLimits) { l.Pids = 0 })},
		{"no runtime", zero(func(l *exechost.ResourceLimits) { l.Runtime = 0 })},
		{"no output cap", zero(func(l *exechost.ResourceLimits) { l.MaxOutputBytes = 0 })},
		{"negative memory", zero(func(l *exechost.ResourceLimits) { l.MemoryBytes = -1 })},
		{"option-like git revision", func(r *exechost.ProvisionRequest) {
			r.Workspace.Git = &exechost.GitSource{RepositoryPath: "/nonexistent", Revision: "--output=/tmp/pwned"}
		}},
		{"git and checkpoints", func(r *exechost.ProvisionRequest) {
			r.Workspace = exechost.Workspace{Git: &exechost.GitSource{RepositoryPath: "/nonexistent", Revision: "HEAD"},
				Checkpoints: []exechost.CheckpointID{"ckpt-a"}}
		}},
		{"invalid checkpoint id", func(r *exechost.ProvisionRequest) {
			r.Workspace.Checkpoints = []exechost.CheckpointID{"../escape"}
		}},
		{"empty execution id", func(r *exechost.ProvisionRequest) { r.ExecutionID = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := s.request(t)
			tt.mutate(&req)
			_, err := s.h.Host.Provision(t.Context(), req)
			require.ErrorIs(t, err, exechost.ErrPolicy)
			var pe *exechost.PolicyError
			require.ErrorAs(t, err, &pe)
			require.NotEmpty(t, pe.Field)
			if req.ExecutionID == "" {
				return
			}
			// Validation came before creation: nothing exists, not even a record.
			require.False(t, s.exists(t, req.ExecutionID))
			_, err = s.h.Host.Exec(t.Context(), req.ExecutionID, exechost.ExecRequest{Command: Cmd.Exit(0, "")})
			require.ErrorIs(t, err, exechost.ErrNotFound)
		})
	}
}

func (s *suite) provisionNotFound(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*exechost.ProvisionRequest)
		image  bool // the image is what is missing
	}{
		{"unknown image", func(r *exechost.ProvisionRequest) { r.Image = s.h.UnknownImage }, true},
		{"unknown checkpoint", func(r *exechost.ProvisionRequest) {
			r.Workspace.Checkpoints = []exechost.CheckpointID{"ckpt-never-stored"}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := s.request(t)
			tt.mutate(&req)
			_, err := s.h.Host.Provision(t.Context(), req)
			require.ErrorIs(t, err, exechost.ErrNotFound)
			// A missing image is never retried; a missing checkpoint is
			// not an image problem.
			require.Equal(t, tt.image, errors.Is(err, exechost.ErrImageNotFound), "ErrImageNotFound: %v", err)
			require.False(t, s.exists(t, req.ExecutionID))
			_, err = s.h.Host.Exec(t.Context(), req.ExecutionID, exechost.ExecRequest{Command: Cmd.Exit(0, "")})
			require.ErrorIs(t, err, exechost.ErrNotFound)
		})
	}
	t.Run("unknown checkpoint restore", func(t *testing.T) {
		id := s.newID(t)
		_, err := s.h.Host.Restore(t.Context(), exechost.RestoreRequest{CheckpointID: "ckpt-never-stored", ExecutionID: id, Labels: s.h.Labels})
		require.ErrorIs(t, err, exechost.ErrNotFound)
		require.False(t, s.exists(t, id))
	})
}

func (s *suite) execPolicy(t *testing.T) {
	x := s.provision(t, nil)
	tests := []struct {
		name string
		req  exechost.ExecRequest
	}{
		{"empty command", exechost.ExecRequest{}},
		{"secret in plain env", exechost.ExecRequest{Command: Cmd.Exit(0, ""), Env: map[string]string{"API_TOKEN": "x"}}},
		{"secret also in env", exechost.ExecRequest{Command: Cmd.Exit(0, ""), Env: map[string]string{"X": "1"}, Secrets: map[string]string{"X": "2"}}},
		{"invalid env name", exechost.ExecRequest{Command: Cmd.Exit(0, ""), Env: map[string]string{"A=B": "x"}}},
		{"loader env", exechost.ExecRequest{Command: Cmd.Exit(0, ""), Env: map[string]string{"LD_PRELOAD": "/workspace/x.so"}}},
		{"loader as secret", exechost.ExecRequest{Command: Cmd.Exit(0, ""), Secrets: map[string]string{"LD_AUDIT": "/workspace/x.so"}}},
		{"PATH env", exechost.ExecRequest{Command: Cmd.Exit(0, ""), Env: map[string]string{"PATH": "/workspace"}}},
		{"AWS key id in plain env", exechost.ExecRequest{Command: Cmd.Exit(0, ""), Env: map[string]string{"KEY_ID": "AKIAIOSFODNN7EXAMPLE"}}},
		{"JWT in plain env", exechost.ExecRequest{Command: Cmd.Exit(0, ""), Env: map[string]string{"SESSION": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig"}}},
		{"negative timeout", exechost.ExecRequest{Command: Cmd.Exit(0, ""), Timeout: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.h.Host.Exec(t.Context(), x.ExecutionID, tt.req)
			require.ErrorIs(t, err, exechost.ErrPolicy)
		})
	}
	// A refused request ran nothing and did not harm the sandbox.
	s.run(t, x.ExecutionID, Cmd.Write("still", "alive"))
}

func (s *suite) terminated(t *testing.T) {
	x := s.provision(t, nil)
	require.NoError(t, s.h.Host.Terminate(t.Context(), x.ExecutionID))
	s.requireGone(t, x.ExecutionID)
	s.requireTerminated(t, x.ExecutionID)
	require.NoError(t, s.h.Host.Terminate(t.Context(), x.ExecutionID), "terminate twice")
	require.NoError(t, s.h.Host.Terminate(t.Context(), s.newID(t)), "terminate unknown")

	unknown := s.newID(t)
	_, err := s.h.Host.Exec(t.Context(), unknown, exechost.ExecRequest{Command: Cmd.Exit(0, "")})
	require.ErrorIs(t, err, exechost.ErrNotFound)
	_, err = s.h.Host.Checkpoint(t.Context(), unknown, exechost.CheckpointRequest{})
	require.ErrorIs(t, err, exechost.ErrNotFound)
}

func (s *suite) timeout(t *testing.T) {
	x := s.provision(t, nil)
	s.run(t, x.ExecutionID, Cmd.Write("log", "before\n"))
	res, err := s.h.Host.Exec(t.Context(), x.ExecutionID, exechost.ExecRequest{
		Command: Cmd.Sleep(time.Hour), Timeout: s.h.ShortTimeout,
	})
	require.ErrorIs(t, err, exechost.ErrTimeout)
	require.NotNil(t, res, "a timeout returns the partial result")
	require.True(t, res.TimedOut)
	require.False(t, res.Truncated || res.Aborted)
	s.requireGone(t, x.ExecutionID)
	s.requireTerminated(t, x.ExecutionID)
	require.NoError(t, s.h.Host.Terminate(t.Context(), x.ExecutionID))
}

func (s *suite) outputLimit(t *testing.T) {
	const limit = 64 << 10
	x := s.provision(t, func(r *exechost.ProvisionRequest) { r.Resources.MaxOutputBytes = limit })
	res, err := s.h.Host.Exec(t.Context(), x.ExecutionID, exechost.ExecRequest{Command: Cmd.Flood(), Timeout: time.Minute})
	require.ErrorIs(t, err, exechost.ErrOutputLimit)
	require.NotNil(t, res, "an overflow returns the partial result")
	require.True(t, res.Truncated)
	require.False(t, res.TimedOut || res.Aborted)
	n := len(res.Stdout) + len(res.Stderr)
	require.LessOrEqual(t, n, limit, "output beyond the cap was kept")
	require.Positive(t, n, "the partial output was dropped")
	require.True(t, strings.HasPrefix(string(res.Stdout), "y\ny\n"), "partial output is what the tool wrote")
	s.requireGone(t, x.ExecutionID)
	s.requireTerminated(t, x.ExecutionID)
}

func (s *suite) cancel(t *testing.T) {
	x := s.provision(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := s.execAsync(ctx, x.ExecutionID, exechost.ExecRequest{Command: Cmd.Gated("log", "gate"), Timeout: 2 * time.Minute})
	s.waitStarted(t, x.ExecutionID, "log")
	cancel()
	o := s.await(t, done, "Exec did not return after its context was canceled")
	require.ErrorIs(t, o.err, exechost.ErrAborted)
	require.ErrorIs(t, o.err, context.Canceled, "the cause is kept")
	require.NotNil(t, o.res)
	require.True(t, o.res.Aborted)
	s.requireGone(t, x.ExecutionID)
	s.requireTerminated(t, x.ExecutionID)

	// A context that is done before the command starts runs nothing: the
	// call fails with the context's error and the sandbox is left as it was.
	y := s.provision(t, nil)
	_, err := s.h.Host.Exec(ctx, y.ExecutionID, exechost.ExecRequest{Command: Cmd.Write("ran", "1")})
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, s.exists(t, y.ExecutionID))
	res := s.exec(t, y.ExecutionID, exechost.ExecRequest{Command: Cmd.Cat("ran")})
	require.NotEqual(t, 0, res.ExitCode, "the command did not run")
}

// killedFromOutside: a sandbox destroyed by someone else while a command
// runs ends the Exec with ErrTerminated (a lost sandbox), never with the
// killed command's exit status as a result, and the execution is over.
func (s *suite) killedFromOutside(t *testing.T) {
	if s.h.Kill == nil {
		t.Skip("Harness.Kill not set")
	}
	x := s.provision(t, nil)
	done := s.execAsync(t.Context(), x.ExecutionID, exechost.ExecRequest{Command: Cmd.Gated("log", "gate"), Timeout: 2 * time.Minute})
	s.waitStarted(t, x.ExecutionID, "log")
	require.NoError(t, s.h.Kill(t.Context(), x.ExecutionID))
	o := s.await(t, done, "Exec did not return after its sandbox was killed")
	require.ErrorIs(t, o.err, exechost.ErrTerminated)
	s.requireGone(t, x.ExecutionID)
	s.requireTerminated(t, x.ExecutionID)
}

func (s *suite) terminateDuringExec(t *testing.T) {
	x := s.provision(t, nil)
	done := s.execAsync(t.Context(), x.ExecutionID, exechost.ExecRequest{Command: Cmd.Gated("log", "gate"), Timeout: 2 * time.Minute})
	s.waitStarted(t, x.ExecutionID, "log")
	// Terminate does not wait for the running command...
	require.NoError(t, s.h.Host.Terminate(t.Context(), x.ExecutionID))
	// ...which ends with ErrTerminated instead of a normal exit.
	o := s.await(t, done, "Exec did not return after its sandbox was terminated")
	require.ErrorIs(t, o.err, exechost.ErrTerminated)
	s.requireGone(t, x.ExecutionID)
	s.requireTerminated(t, x.ExecutionID)
}

// egressPolicy is a one-rule policy to host:443.
func egressPolicy(host string, headers map[string]string) *exechost.EgressPolicy {
	return &exechost.EgressPolicy{Rules: []exechost.EgressRule{{Host: host, Port: 443, Headers: headers}}, MaxBytes: 1 << 20}
}

// egress mutates a request into a NetworkEgress one with one rule.
func egress(host string, headers map[string]string) func(*exechost.ProvisionRequest) {
	return func(r *exechost.ProvisionRequest) {
		r.Network, r.Egress = exechost.NetworkEgress, egressPolicy(host, headers)
	}
}
