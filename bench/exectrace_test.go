//go:build integration

package bench

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/exechost/docker/policy"
	"github.com/agentflow/agentflow/exechost/docker/runner"
)

// traceClient is the daemon's client with the time of each exec API call
// the runner makes recorded.
type traceClient struct {
	*client.Client
	mu                   sync.Mutex
	created, attached    time.Time
	inspects             []time.Time
	exitKnown            time.Time
	inspectsWhileRunning int
}

func (c *traceClient) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.created, c.attached, c.exitKnown, c.inspects, c.inspectsWhileRunning = time.Time{}, time.Time{}, time.Time{}, nil, 0
}

func (c *traceClient) ContainerExecCreate(ctx context.Context, id string, o container.ExecOptions) (container.ExecCreateResponse, error) {
	r, err := c.Client.ContainerExecCreate(ctx, id, o)
	c.mu.Lock()
	c.created = time.Now()
	c.mu.Unlock()
	return r, err
}

func (c *traceClient) ContainerExecAttach(ctx context.Context, id string, o container.ExecAttachOptions) (types.HijackedResponse, error) {
	r, err := c.Client.ContainerExecAttach(ctx, id, o)
	c.mu.Lock()
	c.attached = time.Now()
	c.mu.Unlock()
	return r, err
}

func (c *traceClient) ContainerExecInspect(ctx context.Context, id string) (container.ExecInspect, error) {
	r, err := c.Client.ContainerExecInspect(ctx, id)
	now := time.Now()
	c.mu.Lock()
	c.inspects = append(c.inspects, now)
	if err == nil && r.Running {
		c.inspectsWhileRunning++
	}
	if err == nil && !r.Running && c.exitKnown.IsZero() {
		c.exitKnown = now
	}
	c.mu.Unlock()
	return r, err
}

// eofReader is stdin whose end the runner sees at a recorded time (it
// half-closes the connection right after).
type eofReader struct {
	r   io.Reader
	eof time.Time
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF && e.eof.IsZero() {
		e.eof = time.Now()
	}
	return n, err
}

// lastWrite records when output last arrived.
type lastWrite struct {
	bytes.Buffer
	at time.Time
}

func (w *lastWrite) Write(p []byte) (int, error) {
	w.at = time.Now()
	return w.Buffer.Write(p)
}

type probeReport struct {
	Start, First, EOF int64
	Bytes             int
}

// TestExecRoundTripTrace times one exec through the runner, phase by phase:
// from the exec's creation and start (attach) to the process starting,
// reading its first stdin bytes, seeing stdin's end, its output arriving
// and its exit code being known. The process is bench/cmd/stdinprobe
// (static Go), restored into the sandbox's workspace, which reports its own
// clock readings. Three ways of giving it 1 KiB of stdin: the exec's stdin
// (what Exec does), no stdin at all (the floor), and the exec's stdin read
// by `head -c` in front of the probe (stdin's end no longer waits for
// Docker to close the exec's stdin); and, as the floor, the same exec in a
// plain container of the base image without the sandbox's hardening.
//
//	AGENTFLOW_BENCH=1 go test -tags integration -run TestExecRoundTripTrace -v ./bench/
func TestExecRoundTripTrace(t *testing.T) {
	if os.Getenv("AGENTFLOW_BENCH") != "1" {
		t.Skip("set AGENTFLOW_BENCH=1 to run the exec trace")
	}
	c, _ := benchDocker(t)
	ctx := t.Context()
	base, err := c.ImageInspect(ctx, "agentflow/base:latest")
	require.NoError(t, err)
	store, err := sealedStore(t.TempDir())
	require.NoError(t, err)
	tc := &traceClient{Client: c}
	host, err := docker.New(docker.Options{Client: tc, Store: store})
	require.NoError(t, err)

	ck, probeTar := probeCheckpoint(t, store)
	id := exechost.ExecutionID(fmt.Sprintf("bench-trace-%d", os.Getpid()))
	_, err = host.Provision(ctx, exechost.ProvisionRequest{ExecutionID: id, Image: base.ID, Resources: sandboxLimits,
		Labels: map[string]string{"agentflow.test": "1"}, Workspace: exechost.Workspace{Checkpoints: []exechost.CheckpointID{ck}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = host.Terminate(context.Background(), id) })
	list, err := c.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", policy.LabelExecution+"="+string(id)))})
	require.NoError(t, err)
	require.Len(t, list, 1)
	cid := list[0].ID

	n := 15
	if v := os.Getenv("AGENTFLOW_BENCH_N"); v != "" {
		_, _ = fmt.Sscan(v, &n)
	}
	payload := payload1K()
	run := runner.New(tc, runner.Options{})
	big := bytes.Repeat([]byte("x"), 256<<10)
	plain := plainContainer(t, c, base.ID, probeTar)
	type phases struct{ api, start, firstRead, eof, output, exitKnown, total time.Duration }
	modes := []struct {
		name      string
		argv      []string
		stdin     []byte
		container string
	}{
		{"exec stdin 1 KiB", []string{"/workspace/probe"}, payload, cid},
		{"no stdin", []string{"/workspace/probe"}, nil, cid},
		{"head -c | probe", []string{"/bin/sh", "-c", fmt.Sprintf("head -c %d | /workspace/probe", len(payload))}, payload, cid},
		{"exec stdin 256 KiB", []string{"/workspace/probe"}, big, cid},
		{"plain container 1 KiB", []string{"/tmp/probe"}, payload, plain},
	}
	results := make(map[string][]phases)
	for i := range n + 1 {
		for _, m := range modes {
			tc.reset()
			var in *eofReader
			cmd := runner.Command{Argv: m.argv, User: policy.DefaultUser, WorkDir: policy.WorkspaceDir, Timeout: time.Minute, MaxOutput: 1 << 20}
			if m.stdin != nil {
				in = &eofReader{r: bytes.NewReader(m.stdin)}
				cmd.Stdin = in
			}
			var out lastWrite
			cmd.Stdout = &out
			t0 := time.Now()
			if m.container == plain {
				cmd.WorkDir = "/tmp"
			}
			res, err := run.Run(ctx, m.container, cmd)
			done := time.Now()
			require.NoError(t, err)
			require.Zero(t, res.ExitCode)
			var rep probeReport
			require.NoError(t, json.Unmarshal(out.Bytes(), &rep), "%s", out.String())
			require.Equal(t, len(m.stdin), rep.Bytes)
			if i == 0 {
				continue // warm-up
			}
			at := tc.attached
			results[m.name] = append(results[m.name], phases{
				api:       at.Sub(t0),
				start:     time.Unix(0, rep.Start).Sub(at),
				firstRead: time.Unix(0, max(rep.First, rep.Start)).Sub(time.Unix(0, rep.Start)),
				eof:       time.Unix(0, rep.EOF).Sub(time.Unix(0, max(rep.First, rep.Start))),
				output:    out.at.Sub(time.Unix(0, rep.EOF)),
				exitKnown: tc.exitKnown.Sub(out.at),
				total:     done.Sub(t0),
			})
		}
	}
	// med is "median/p90" of one phase.
	med := func(ps []phases, f func(phases) time.Duration) string {
		d := make([]time.Duration, len(ps))
		for i, p := range ps {
			d[i] = f(p)
		}
		slices.Sort(d)
		r := func(x time.Duration) string { return fmt.Sprintf("%.1f", float64(x)/float64(time.Millisecond)) }
		return r(median(d)) + "/" + r(d[len(d)*9/10])
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nexec round trip through the runner, phases in ms, median/p90 of %d (runtime: daemon default)\n", n)
	fmt.Fprintf(&sb, "%-22s %11s %11s %11s %11s %11s %11s %11s\n", "stdin", "create+att", "att→proc", "proc→1st rd", "rd→EOF", "EOF→output", "out→exit", "total")
	for _, m := range modes {
		ps := results[m.name]
		fmt.Fprintf(&sb, "%-22s %11s %11s %11s %11s %11s %11s %11s\n", m.name,
			med(ps, func(p phases) time.Duration { return p.api }),
			med(ps, func(p phases) time.Duration { return p.start }),
			med(ps, func(p phases) time.Duration { return p.firstRead }),
			med(ps, func(p phases) time.Duration { return p.eof }),
			med(ps, func(p phases) time.Duration { return p.output }),
			med(ps, func(p phases) time.Duration { return p.exitKnown }),
			med(ps, func(p phases) time.Duration { return p.total }))
	}
	t.Log(sb.String())
	fmt.Print(sb.String())
}

// probeCheckpoint stores a checkpoint holding bench/cmd/stdinprobe, built
// static, as /workspace/probe.
func probeCheckpoint(t *testing.T, store checkpoint.Store) (exechost.CheckpointID, []byte) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "probe")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/stdinprobe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	b, err := os.ReadFile(bin)
	require.NoError(t, err)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "probe", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(b)),
		ModTime: time.Unix(1700000000, 0), Format: tar.FormatGNU}))
	_, err = tw.Write(b)
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	id := exechost.CheckpointID(fmt.Sprintf("ckpt-probe-%d", os.Getpid()))
	_, err = store.Put(t.Context(), checkpoint.Manifest{ID: id, ExecutionID: "bench", ImageDigest: "sha256:" + strings.Repeat("0", 64),
		Resources: sandboxLimits, Reason: "probe"}, bytes.NewReader(buf.Bytes()), nil)
	require.NoError(t, err)
	return id, buf.Bytes()
}

// plainContainer is the floor: the base image with none of the sandbox's
// hardening (default seccomp profile, writable root, no limits), the probe
// copied to /tmp.
func plainContainer(t *testing.T, c *client.Client, image string, probeTar []byte) string {
	t.Helper()
	ctx := t.Context()
	cr, err := c.ContainerCreate(ctx, &container.Config{Image: image, Cmd: []string{"sleep", "600"},
		Labels: map[string]string{"agentflow.test": "1"}}, nil, nil, nil, "")
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.ContainerRemove(context.Background(), cr.ID, container.RemoveOptions{Force: true})
	})
	require.NoError(t, c.CopyToContainer(ctx, cr.ID, "/tmp", bytes.NewReader(probeTar), container.CopyToContainerOptions{}))
	require.NoError(t, c.ContainerStart(ctx, cr.ID, container.StartOptions{}))
	return cr.ID
}
