package hosttest

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
)

// Harness is what the contract suite needs from a host under test: the host
// itself plus the few things only the test's author can provide, such as a
// way to look at a sandbox behind the host's back.
type Harness struct {
	Host exechost.ExecutionHost
	// Image is a pinned image with /bin/sh and busybox (what Cmd runs).
	Image string
	// Resources of every sandbox the suite provisions; zero fields take
	// DefaultResources'.
	Resources exechost.ResourceLimits
	// Labels go on every sandbox (e.g. agentflow.test=1 for leak checks).
	Labels map[string]string
	// IDPrefix keeps execution IDs unique across concurrent suites.
	IDPrefix string
	// ShortTimeout is the Exec timeout of the timeout case: long enough for
	// the host to start a command. Default one second.
	ShortTimeout time.Duration
	// Probe runs argv (a Cmd command) in id's sandbox outside the host's
	// Exec/Checkpoint serialisation, as `docker exec` next to the host
	// would. Required: it is how the suite watches and releases a running
	// Exec without timing assumptions.
	Probe func(ctx context.Context, id exechost.ExecutionID, argv []string) (stdout []byte, exitCode int, err error)
	// Exists reports whether id's sandbox still exists, checked behind the
	// host's back (for Docker: a container labelled with the execution).
	Exists func(ctx context.Context, id exechost.ExecutionID) (bool, error)
	// OverlapWindow is how long the serialisation case gives a checkpoint
	// to (wrongly) complete while an Exec runs (default 500 ms). It bounds
	// how likely a broken host is caught, never whether a correct one passes.
	OverlapWindow time.Duration
	// CheckpointContent returns a checkpoint's stored bytes, which must not
	// contain a secret. Optional: nil skips that one assertion.
	CheckpointContent func(ctx context.Context, id exechost.CheckpointID) ([]byte, error)
	// TamperCheckpoint changes one byte of a checkpoint's stored content
	// behind the host's back (as a writer to the store could), keeping its
	// length. Optional: nil skips TamperedCheckpointIsRefused.
	TamperCheckpoint func(ctx context.Context, id exechost.CheckpointID) error
	// Kill destroys id's sandbox behind the host's back, as an operator's
	// docker kill or a daemon restart would. Optional: nil skips
	// KilledFromOutsideDuringExec.
	Kill func(ctx context.Context, id exechost.ExecutionID) error
	// UnknownImage is a pinned reference that does not exist (default
	// sha256:000…0).
	UnknownImage string
	// GitRoot is a repository root the host was configured with (worker
	// --git-root): the git cases make their repositories under it, and
	// GitMaxEntries is the host's git entry cap. Both required by them.
	GitRoot       string
	GitMaxEntries int
}

// DefaultResources are generous enough for every case of the suite.
func DefaultResources() exechost.ResourceLimits {
	return exechost.ResourceLimits{
		NanoCPUs: 1e9, MemoryBytes: 128 << 20, DiskBytes: 32 << 20, Pids: 64,
		Runtime: 2 * time.Minute, MaxOutputBytes: 1 << 20,
	}
}

// suite carries the harness through the subtests.
type suite struct {
	h   Harness
	seq atomic.Int64
}

// Run checks h.Host against the exechost contract. Every sandbox it makes
// is terminated and checked gone before the subtest that made it ends.
func Run(t *testing.T, h Harness) {
	t.Helper()
	require.NotNil(t, h.Host, "Harness.Host")
	require.NotEmpty(t, h.Image, "Harness.Image")
	require.NotNil(t, h.Probe, "Harness.Probe")
	require.NotNil(t, h.Exists, "Harness.Exists")
	def := DefaultResources()
	r := &h.Resources
	for _, f := range []struct{ v, d *int64 }{
		{&r.NanoCPUs, &def.NanoCPUs}, {&r.MemoryBytes, &def.MemoryBytes}, {&r.DiskBytes, &def.DiskBytes},
		{&r.Pids, &def.Pids}, {&r.MaxOutputBytes, &def.MaxOutputBytes},
	} {
		if *f.v == 0 {
			*f.v = *f.d
		}
	}
	if r.Runtime == 0 {
		r.Runtime = def.Runtime
	}
	if h.ShortTimeout == 0 {
		h.ShortTimeout = time.Second
	}
	if h.OverlapWindow == 0 {
		h.OverlapWindow = 500 * time.Millisecond
	}
	if h.UnknownImage == "" {
		h.UnknownImage = "sha256:" + strings.Repeat("0", 64)
	}
	s := &suite{h: h}

	t.Run("Lifecycle", s.lifecycle)
	t.Run("ProvisionIsIdempotent", s.provisionIdempotent)
	t.Run("ProvisionRefusesPolicyViolations", s.provisionPolicy)
	t.Run("ProvisionUnknownImageOrCheckpoint", s.provisionNotFound)
	t.Run("ExecRefusesPolicyViolations", s.execPolicy)
	t.Run("TerminatedAndUnknownExecutions", s.terminated)
	t.Run("TimeoutDestroysSandbox", s.timeout)
	t.Run("OutputLimitDestroysSandbox", s.outputLimit)
	t.Run("CancelDestroysSandbox", s.cancel)
	t.Run("TerminateDuringExec", s.terminateDuringExec)
	t.Run("LiveStderr", s.liveStderr)
	t.Run("KilledFromOutsideDuringExec", s.killedFromOutside)
	t.Run("GitWorkspace", s.gitWorkspace)
	t.Run("GitImportHostile", s.gitHostile)
	t.Run("CheckpointSeedsProvision", s.checkpointSeeds)
	t.Run("LayeredCheckpointsLaterWins", s.layered)
	t.Run("RestoreRoundTrip", s.restore)
	t.Run("TamperedCheckpointIsRefused", s.tampered)
	t.Run("SymlinkChainIsNotCheckpointed", s.symlinkChain)
	t.Run("ExecAndCheckpointSerialize", s.serialize)
	t.Run("ExecsOnDifferentSandboxesAreIndependent", s.independent)
	t.Run("SecretsReachProcessNotCheckpoint", s.secrets)
	t.Run("CheckpointRedactsValues", s.redact)
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func (s *suite) newID(t *testing.T) exechost.ExecutionID {
	name := unsafeID.ReplaceAllString(t.Name(), "_")
	return exechost.ExecutionID(fmt.Sprintf("hosttest-%s%s-%d", s.h.IDPrefix, name, s.seq.Add(1)))
}

func (s *suite) request(t *testing.T) exechost.ProvisionRequest {
	return exechost.ProvisionRequest{
		ExecutionID: s.newID(t), Image: s.h.Image, Resources: s.h.Resources,
		Network: exechost.NetworkNone, Labels: s.h.Labels,
	}
}

// cleanup terminates id when the test ends and checks the sandbox is gone.
func (s *suite) cleanup(t *testing.T, id exechost.ExecutionID) {
	t.Cleanup(func() {
		ctx := context.Background()
		require.NoError(t, s.h.Host.Terminate(ctx, id))
		s.requireGone(t, id)
	})
}

// provision creates a sandbox that is terminated when the test ends.
func (s *suite) provision(t *testing.T, mutate func(*exechost.ProvisionRequest)) *exechost.Execution {
	t.Helper()
	req := s.request(t)
	if mutate != nil {
		mutate(&req)
	}
	x, err := s.h.Host.Provision(t.Context(), req)
	require.NoError(t, err)
	s.cleanup(t, x.ExecutionID)
	return x
}

func (s *suite) exec(t *testing.T, id exechost.ExecutionID, req exechost.ExecRequest) *exechost.ExecResult {
	t.Helper()
	if req.Timeout == 0 {
		req.Timeout = time.Minute
	}
	res, err := s.h.Host.Exec(t.Context(), id, req)
	require.NoError(t, err)
	require.NotNil(t, res)
	return res
}

// run executes argv and requires exit 0.
func (s *suite) run(t *testing.T, id exechost.ExecutionID, argv []string) string {
	t.Helper()
	res := s.exec(t, id, exechost.ExecRequest{Command: argv})
	require.Equal(t, 0, res.ExitCode, "%q: stderr %s", argv, res.Stderr)
	return string(res.Stdout)
}

func (s *suite) exists(t *testing.T, id exechost.ExecutionID) bool {
	t.Helper()
	ok, err := s.h.Exists(context.Background(), id)
	require.NoError(t, err)
	return ok
}

func (s *suite) requireGone(t *testing.T, id exechost.ExecutionID) {
	t.Helper()
	require.False(t, s.exists(t, id), "sandbox of %s must be gone", id)
}

// requireTerminated checks that later calls on id report ErrTerminated.
func (s *suite) requireTerminated(t *testing.T, id exechost.ExecutionID) {
	t.Helper()
	_, err := s.h.Host.Exec(t.Context(), id, exechost.ExecRequest{Command: Cmd.Exit(0, "")})
	require.ErrorIs(t, err, exechost.ErrTerminated)
	_, err = s.h.Host.Checkpoint(t.Context(), id, exechost.CheckpointRequest{})
	require.ErrorIs(t, err, exechost.ErrTerminated)
}

// probe runs argv behind the host's back and returns its stdout.
func (s *suite) probe(t *testing.T, id exechost.ExecutionID, argv []string) (string, int) {
	t.Helper()
	out, code, err := s.h.Probe(t.Context(), id, argv)
	require.NoError(t, err)
	return string(out), code
}

// waitStarted waits until a Gated command on id has written its start line.
func (s *suite) waitStarted(t *testing.T, id exechost.ExecutionID, log string) {
	t.Helper()
	require.Eventually(t, func() bool {
		out, code, err := s.h.Probe(t.Context(), id, Cmd.Cat(log))
		return err == nil && code == 0 && string(out) == "start\n"
	}, time.Minute, 20*time.Millisecond, "the gated command never started")
}

// execAsync runs one Exec in the background; the channel yields its outcome.
type outcome struct {
	res *exechost.ExecResult
	err error
}

func (s *suite) execAsync(ctx context.Context, id exechost.ExecutionID, req exechost.ExecRequest) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		res, err := s.h.Host.Exec(ctx, id, req)
		ch <- outcome{res, err}
	}()
	return ch
}

// await waits for an Exec that must end promptly because its sandbox is
// going away; the bound only turns a hang into a failure.
func (s *suite) await(t *testing.T, done <-chan outcome, msg string) outcome {
	t.Helper()
	select {
	case o := <-done:
		return o
	case <-time.After(time.Minute):
		t.Fatal(msg)
		return outcome{}
	}
}
