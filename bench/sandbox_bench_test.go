//go:build integration

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/exechost/docker/policy"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/testenv"
)

const sandboxBenchImage = "agentflow/tool-echo:1.0"

// poolWarm is what the worker's pool warms (worker/docker.go): the tool.
var poolWarm = []string{"/bin/tool"}

// clockBenchImage reports when it read its input (mode clock).
const clockBenchImage = "agentflow/tool-testtool:1.0"

var sandboxLimits = exechost.ResourceLimits{
	NanoCPUs: 1e9, MemoryBytes: 256 << 20, DiskBytes: 64 << 20, Pids: 128,
	Runtime: 2 * time.Minute, MaxOutputBytes: 8 << 20,
}

// payload1K is a 1 KiB JSON object for the tool's stdin.
func payload1K() []byte {
	p := []byte(`{"text":"` + strings.Repeat("x", 1024-11) + `"}`)
	if len(p) != 1024 {
		panic(len(p))
	}
	return p
}

// benchDocker returns a client of the local daemon (closed with the test)
// and the benchmark image; without a daemon it skips, or fails under
// AGENTFLOW_REQUIRE_DOCKER=1.
func benchDocker(t *testing.T) (*client.Client, image.InspectResponse) {
	t.Helper()
	c := testenv.Docker(t)
	img, err := c.ImageInspect(t.Context(), sandboxBenchImage)
	require.NoError(t, err, "run `make images` first")
	return c, img
}

// TestSandboxCycleBench measures the full sandboxed step cycle (provision →
// exec of a tool with 1 KiB JSON on stdin → checkpoint → terminate) against
// a bare `docker run --rm -i` of the same image with the same hardening
// flags, sequentially and 4 at a time, and prints medians and ratios.
//
//	AGENTFLOW_BENCH=1 go test -tags integration -run TestSandboxCycleBench -v ./bench/
func TestSandboxCycleBench(t *testing.T) {
	if os.Getenv("AGENTFLOW_BENCH") != "1" {
		t.Skip("set AGENTFLOW_BENCH=1 to run the sandbox benchmark")
	}
	c, img := benchDocker(t)
	ctx := t.Context()
	store, err := sealedStore(t.TempDir())
	require.NoError(t, err)
	host, err := docker.New(docker.Options{Client: c, Store: store})
	require.NoError(t, err)

	n := 10
	if v, err := strconv.Atoi(os.Getenv("AGENTFLOW_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	payload := payload1K()
	var seq int
	var seqMu sync.Mutex
	nextID := func() exechost.ExecutionID {
		seqMu.Lock()
		defer seqMu.Unlock()
		seq++
		return exechost.ExecutionID(fmt.Sprintf("bench-%d-%d", os.Getpid(), seq))
	}

	ours := func() error {
		id := nextID()
		x, err := host.Provision(ctx, exechost.ProvisionRequest{ExecutionID: id, Image: img.ID, Resources: sandboxLimits,
			Labels: map[string]string{"agentflow.test": "1"}})
		if err != nil {
			return err
		}
		defer host.Terminate(context.Background(), x.ExecutionID)
		res, err := host.Exec(ctx, id, exechost.ExecRequest{Command: []string{"/bin/tool"}, Stdin: payload, Timeout: time.Minute})
		if err != nil {
			return err
		}
		if res.ExitCode != 0 || !bytes.Contains(res.Stdout, []byte(`"text"`)) {
			return fmt.Errorf("tool: exit %d: %s %s", res.ExitCode, res.Stdout, res.Stderr)
		}
		ck, err := host.Checkpoint(ctx, id, exechost.CheckpointRequest{})
		if err != nil {
			return err
		}
		defer store.Delete(context.Background(), ck.CheckpointID)
		return host.Terminate(ctx, id)
	}
	bare := func() error { return bareDockerRun(ctx, img.ID, payload) }

	// Warm up both paths once (image layers, page cache).
	require.NoError(t, ours())
	require.NoError(t, bare())

	type row struct {
		name           string
		ours, bare     time.Duration
		oursW, bareW   time.Duration // wall time of the whole batch
		concurrency, n int
	}
	var rows []row
	for _, conc := range []int{1, 4} {
		// Interleave the two so drift (other load on the machine) hits both.
		var o, b []time.Duration
		var ow, bw time.Duration
		for range max(1, n/conc) {
			d, w, err := batch(conc, ours)
			require.NoError(t, err)
			o, ow = append(o, d...), ow+w
			d, w, err = batch(conc, bare)
			require.NoError(t, err)
			b, bw = append(b, d...), bw+w
		}
		rows = append(rows, row{name: fmt.Sprintf("concurrency %d", conc), ours: median(o), bare: median(b),
			oursW: ow, bareW: bw, concurrency: conc, n: len(o)})
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nsandbox step cycle vs bare hardened docker run --rm (image %s, 1 KiB JSON stdin)\n", sandboxBenchImage)
	fmt.Fprintf(&sb, "%-14s %4s %14s %14s %7s %12s %12s\n", "mode", "n", "ours median", "bare median", "ratio", "ours wall", "bare wall")
	for _, r := range rows {
		fmt.Fprintf(&sb, "%-14s %4d %14s %14s %7.2f %12s %12s\n", r.name, r.n, r.ours.Round(time.Millisecond), r.bare.Round(time.Millisecond),
			float64(r.ours)/float64(r.bare), r.oursW.Round(time.Millisecond), r.bareW.Round(time.Millisecond))
	}
	t.Log(sb.String())
	fmt.Print(sb.String())
}

// batch runs f conc times at once and returns each duration and the wall
// time of the batch.
func batch(conc int, f func() error) ([]time.Duration, time.Duration, error) {
	durs := make([]time.Duration, conc)
	errs := make([]error, conc)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := time.Now()
			errs[i] = f()
			durs[i] = time.Since(s)
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return nil, 0, err
		}
	}
	return durs, wall, nil
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// sealedStore is the checkpoint store a worker uses: a local directory
// behind signed manifests (checkpoint.Sealed), so the benchmarks pay the
// HMAC and the verification every real step pays.
func sealedStore(dir string) (checkpoint.Store, error) {
	local, err := checkpoint.NewLocal(dir)
	if err != nil {
		return nil, err
	}
	keys, _, err := checkpoint.LoadOrCreateLocalKeyring(dir + "-keys")
	if err != nil {
		return nil, err
	}
	return checkpoint.NewSealed(local, keys, checkpoint.SealedOptions{})
}

// TestHandoffBench measures what a dependent step pays for its
// dependency's workspace, against a fresh Provision measured in the same
// run: Restore of a checkpoint of an empty workspace, Restore of a
// one-file checkpoint, each with the local directory store and with S3
// (MinIO on loopback), both behind signed manifests; and the exec round
// trip (Exec of /bin/tool with 1 KiB of JSON on stdin in a running
// sandbox) against `docker exec -i` of the same command in the same
// sandbox. The kinds alternate so load hits all alike; only the call
// itself is timed (Terminate is not).
//
//	AGENTFLOW_BENCH=1 go test -tags integration -run TestHandoffBench -v ./bench/
func TestHandoffBench(t *testing.T) {
	if os.Getenv("AGENTFLOW_BENCH") != "1" {
		t.Skip("set AGENTFLOW_BENCH=1 to run the hand-off benchmark")
	}
	c, img := benchDocker(t)
	ctx := t.Context()
	local, err := sealedStore(t.TempDir())
	require.NoError(t, err)
	keys, err := checkpoint.LoadKeyring(benchKeyFile(t))
	require.NoError(t, err)
	_, s3 := minioStore(t, "handoff")
	stores := []struct {
		name string
		s    checkpoint.Store
	}{
		{"local dir", local},
		{"s3 (minio)", mustSealed(t, objstore.Sub(s3, "checkpoints"), keys)},
	}
	n := 10
	if v, err := strconv.Atoi(os.Getenv("AGENTFLOW_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	labels := map[string]string{"agentflow.test": "1"}
	seq := 0
	nextID := func() exechost.ExecutionID {
		seq++
		return exechost.ExecutionID(fmt.Sprintf("bench-handoff-%d-%d", os.Getpid(), seq))
	}
	payload := payload1K()

	type kind struct {
		name string
		host *docker.Host
		f    func(h *docker.Host, id exechost.ExecutionID) error
	}
	fresh := func(h *docker.Host, id exechost.ExecutionID) error {
		_, err := h.Provision(ctx, exechost.ProvisionRequest{ExecutionID: id, Image: img.ID, Resources: sandboxLimits, Labels: labels})
		return err
	}
	restore := func(ck exechost.CheckpointID) func(*docker.Host, exechost.ExecutionID) error {
		return func(h *docker.Host, id exechost.ExecutionID) error {
			res := sandboxLimits
			_, err := h.Restore(ctx, exechost.RestoreRequest{CheckpointID: ck, ExecutionID: id, Image: img.ID, Resources: &res, Labels: labels})
			return err
		}
	}
	kinds := []kind{{name: "fresh provision (baseline)", f: fresh}}
	var host *docker.Host
	for _, st := range stores {
		h, err := docker.New(docker.Options{Client: c, Store: st.s})
		require.NoError(t, err)
		if host == nil {
			host, kinds[0].host = h, h
		}
		// The two checkpoints, made by a sandbox as a step would.
		src := nextID()
		require.NoError(t, fresh(h, src))
		empty, err := h.Checkpoint(ctx, src, exechost.CheckpointRequest{})
		require.NoError(t, err)
		_, err = h.Exec(ctx, src, exechost.ExecRequest{Command: []string{"/bin/sh", "-c", "echo hello > out.txt"}, Timeout: time.Minute})
		require.NoError(t, err)
		tiny, err := h.Checkpoint(ctx, src, exechost.CheckpointRequest{})
		require.NoError(t, err)
		require.NoError(t, h.Terminate(ctx, src))
		kinds = append(kinds, kind{"restore, empty, " + st.name, h, restore(empty.CheckpointID)},
			kind{"restore, 1 file, " + st.name, h, restore(tiny.CheckpointID)})
	}
	got := make([][]time.Duration, len(kinds))
	for i := range n + 1 {
		for k, kd := range kinds {
			id := nextID()
			s := time.Now()
			err := kd.f(kd.host, id)
			d := time.Since(s)
			_ = kd.host.Terminate(context.Background(), id)
			require.NoError(t, err, kd.name)
			if i > 0 { // the first round warms up
				got[k] = append(got[k], d)
			}
		}
	}

	// The exec round trip, ours and the docker CLI's, in one sandbox.
	ex := nextID()
	require.NoError(t, fresh(host, ex))
	t.Cleanup(func() { _ = host.Terminate(context.Background(), ex) })
	list, err := c.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", policy.LabelExecution+"="+string(ex)))})
	require.NoError(t, err)
	require.Len(t, list, 1)
	var ours, bare []time.Duration
	for i := range n + 1 {
		s := time.Now()
		res, err := host.Exec(ctx, ex, exechost.ExecRequest{Command: []string{"/bin/tool"}, Stdin: payload, Timeout: time.Minute})
		d := time.Since(s)
		require.NoError(t, err)
		require.Zero(t, res.ExitCode, "%s", res.Stderr)
		s = time.Now()
		cmd := exec.CommandContext(ctx, "docker", "exec", "-i", "-u", policy.DefaultUser, "-w", policy.WorkspaceDir, list[0].ID, "/bin/tool")
		cmd.Stdin = bytes.NewReader(payload)
		out, err := cmd.CombinedOutput()
		b := time.Since(s)
		require.NoError(t, err, "%s", out)
		if i > 0 {
			ours, bare = append(ours, d), append(bare, b)
		}
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "\nworkspace hand-off and exec round trip (image %s, n = %d, medians)\n", sandboxBenchImage, n)
	fmt.Fprintf(&sb, "%-34s %10s %8s\n", "call", "median", "ratio")
	for k, kd := range kinds {
		fmt.Fprintf(&sb, "%-34s %10s %8.2f\n", kd.name, median(got[k]).Round(time.Millisecond),
			float64(median(got[k]))/float64(median(got[0])))
	}
	fmt.Fprintf(&sb, "%-34s %10s %8s\n", "docker exec -i (baseline)", median(bare).Round(time.Millisecond), "1.00")
	fmt.Fprintf(&sb, "%-34s %10s %8.2f\n", "Exec /bin/tool, 1 KiB stdin", median(ours).Round(time.Millisecond),
		float64(median(ours))/float64(median(bare)))
	t.Log(sb.String())
	fmt.Print(sb.String())
}

// TestWarmPoolBench measures one sandboxed step (provision → exec of a
// tool with 1 KiB JSON on stdin → terminate, no checkpoint) with and
// without the warm pool, against a bare hardened `docker run --rm -i` of
// the same image measured in the same run:
//
//   - sequential, bare/cold/pooled interleaved, with no gap and with a
//     250 ms gap between steps (orchestration and checkpoint time); then
//     pooled steps only, back to back, with a pool of 2; hit rates printed;
//
//   - 16 steps at once after the pool had time to fill (a burst): p50 and
//     p99 of Provision start → the tool's output back (the echo tool
//     answers as soon as it has read its stdin).
//
//     AGENTFLOW_BENCH=1 go test -tags integration -run TestWarmPoolBench -v ./bench/
func TestWarmPoolBench(t *testing.T) {
	if os.Getenv("AGENTFLOW_BENCH") != "1" {
		t.Skip("set AGENTFLOW_BENCH=1 to run the sandbox benchmark")
	}
	c, img := benchDocker(t)
	ctx := t.Context()
	store, err := sealedStore(t.TempDir())
	require.NoError(t, err)
	labels := map[string]string{"agentflow.test": "1"}
	cold, err := docker.New(docker.Options{Client: c, Store: store})
	require.NoError(t, err)
	const burst = 16
	pooled, err := docker.New(docker.Options{Client: c, Store: store,
		Pool: docker.PoolOptions{Size: burst, MaxTotal: burst, Creates: 2, Labels: labels, Warm: poolWarm}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pooled.Drain(context.Background())) })

	n := 20
	if v, err := strconv.Atoi(os.Getenv("AGENTFLOW_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	payload := payload1K()
	var seq int
	var seqMu sync.Mutex
	nextID := func() exechost.ExecutionID {
		seqMu.Lock()
		defer seqMu.Unlock()
		seq++
		return exechost.ExecutionID(fmt.Sprintf("bench-pool-%d-%d", os.Getpid(), seq))
	}
	// hostStep is one step on host: Provision of image → Exec of /bin/tool
	// with stdin → Terminate; answer checks the result and may record a
	// time against the step's start (Provision's).
	hostStep := func(host *docker.Host, image string, stdin []byte, answer func(start time.Time, res *exechost.ExecResult) error) func() error {
		return func() error {
			id := nextID()
			start := time.Now()
			x, err := host.Provision(ctx, exechost.ProvisionRequest{ExecutionID: id, Image: image, Resources: sandboxLimits, Labels: labels})
			if err != nil {
				return err
			}
			defer host.Terminate(context.Background(), x.ExecutionID)
			res, err := host.Exec(ctx, id, exechost.ExecRequest{Command: []string{"/bin/tool"}, Stdin: stdin, Timeout: time.Minute})
			if err != nil {
				return err
			}
			if err := answer(start, res); err != nil {
				return err
			}
			return host.Terminate(ctx, id)
		}
	}
	// answeredStep is an echo step; answered, when not nil, gets its time
	// from Provision's start to the tool's output back (Exec's return),
	// before Terminate.
	var answeredMu sync.Mutex
	answeredStep := func(host *docker.Host, answered *[]time.Duration) func() error {
		return hostStep(host, img.ID, payload, func(start time.Time, res *exechost.ExecResult) error {
			if answered != nil {
				answeredMu.Lock()
				*answered = append(*answered, time.Since(start))
				answeredMu.Unlock()
			}
			if res.ExitCode != 0 || !bytes.Contains(res.Stdout, []byte(`"text"`)) {
				return fmt.Errorf("tool: exit %d: %s %s", res.ExitCode, res.Stdout, res.Stderr)
			}
			return nil
		})
	}
	step := func(host *docker.Host) func() error { return answeredStep(host, nil) }
	bare := func() error { return bareDockerRun(ctx, img.ID, payload) }
	// waitFull waits until the pool holds want idle sandboxes (not timed).
	waitFull := func(want int) {
		require.Eventually(t, func() bool { return pooled.PoolStats().Idle >= want }, 2*time.Minute, 20*time.Millisecond)
	}

	// Warm up every path once (image layers, page cache); the pooled
	// host's first step is a miss that teaches it the key.
	require.NoError(t, bare())
	require.NoError(t, step(cold)())
	require.NoError(t, step(pooled)())

	var sb strings.Builder
	fmt.Fprintf(&sb, "\nwarm pool: one step (provision → exec 1 KiB stdin → terminate) vs bare hardened docker run --rm -i (image %s)\n", sandboxBenchImage)
	fmt.Fprintf(&sb, "%-22s %4s %12s %12s %12s %10s %10s %9s\n", "mode", "n", "bare median", "cold median", "pool median", "cold/bare", "pool/bare", "pool hits")
	var b0 []time.Duration // the bare steps of the first row, for the ratio of the pool-only row
	for _, gap := range []time.Duration{0, 250 * time.Millisecond} {
		waitFull(burst)
		var b, co, po []time.Duration
		before := pooled.PoolStats()
		for range n {
			// Interleaved, so drift (other load on the machine) hits all three.
			for _, f := range []struct {
				fn  func() error
				out *[]time.Duration
			}{{bare, &b}, {step(cold), &co}, {step(pooled), &po}} {
				s := time.Now()
				require.NoError(t, f.fn())
				*f.out = append(*f.out, time.Since(s))
				time.Sleep(gap)
			}
		}
		after := pooled.PoolStats()
		fmt.Fprintf(&sb, "%-22s %4d %12s %12s %12s %10.2f %10.2f %6d/%d\n", fmt.Sprintf("sequential, gap %s", gap), n,
			median(b).Round(time.Millisecond), median(co).Round(time.Millisecond), median(po).Round(time.Millisecond),
			float64(median(co))/float64(median(b)), float64(median(po))/float64(median(b)),
			after.Hits-before.Hits, (after.Hits+after.Misses)-(before.Hits+before.Misses))
		if b0 == nil {
			b0 = b
		}
	}

	// A realistic --warm-pool 2, pooled steps only, back to back: the
	// refill races the next step (the rows above interleave bare and cold
	// steps, in which the pool refills).
	small, err := docker.New(docker.Options{Client: c, Store: store,
		Pool: docker.PoolOptions{Size: 2, Labels: labels, Warm: poolWarm}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, small.Drain(context.Background())) })
	require.NoError(t, step(small)())
	require.Eventually(t, func() bool { return small.PoolStats().Idle >= 2 }, 2*time.Minute, 20*time.Millisecond)
	var bb []time.Duration
	for range n {
		s := time.Now()
		require.NoError(t, step(small)())
		bb = append(bb, time.Since(s))
	}
	st := small.PoolStats()
	fmt.Fprintf(&sb, "%-22s %4d %12s %12s %12s %10s %10.2f %6d/%d\n", "pool 2 only, no gap", n, "", "",
		median(bb).Round(time.Millisecond), "", float64(median(bb))/float64(median(b0)), st.Hits, st.Hits+st.Misses-1)

	// Bursts of 16: each round starts with a full pool. Two times per
	// step: to the tool's answer (the measure: Provision start →
	// the tool has read its input and answered) and the whole step with
	// Terminate; bare is a whole docker run --rm either way.
	rounds := max(1, n/10)
	var b, co, po, coA, poA []time.Duration
	before := pooled.PoolStats()
	for range rounds {
		waitFull(burst)
		for _, f := range []struct {
			fn  func() error
			out *[]time.Duration
		}{{bare, &b}, {answeredStep(cold, &coA), &co}, {answeredStep(pooled, &poA), &po}} {
			d, _, err := batch(burst, f.fn)
			require.NoError(t, err)
			*f.out = append(*f.out, d...)
		}
	}
	after := pooled.PoolStats()
	q := func(d []time.Duration, p float64) time.Duration { return durQuantile(d, p).Round(time.Millisecond) }
	fmt.Fprintf(&sb, "\nburst of %d steps at once (%d rounds); pool hits %d/%d, launched through the pooled launcher %d:\n", burst, rounds,
		after.Hits-before.Hits, (after.Hits+after.Misses)-(before.Hits+before.Misses), after.Launched-before.Launched)
	fmt.Fprintf(&sb, "%-40s %10s %10s %10s %10s %10s %10s\n", "", "bare p50", "bare p99", "cold p50", "cold p99", "pool p50", "pool p99")
	fmt.Fprintf(&sb, "%-40s %10s %10s %10s %10s %10s %10s\n", "Provision start → tool output back", "", "", q(coA, 0.5), q(coA, 0.99), q(poA, 0.5), q(poA, 0.99))
	fmt.Fprintf(&sb, "%-40s %10s %10s %10s %10s %10s %10s\n", "whole step (with Terminate; bare: run)", q(b, 0.5), q(b, 0.99), q(co, 0.5), q(co, 0.99), q(po, 0.5), q(po, 0.99))

	// The measure, timestamped by the tool itself: Provision start
	// → the tool has read its input (testtool's clock mode; the sandbox
	// shares the host's clock). Its own pooled host: another image is
	// another pool key, and the pool above is at its cap.
	clockImg, err := c.ImageInspect(ctx, clockBenchImage)
	require.NoError(t, err, "run `make images` first")
	clockPool, err := docker.New(docker.Options{Client: c, Store: store,
		Pool: docker.PoolOptions{Size: burst, MaxTotal: burst, Creates: 2, Labels: labels, Warm: poolWarm}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, clockPool.Drain(context.Background())) })
	var clockMu sync.Mutex
	record := func(sink *[]time.Duration, start time.Time, stdout []byte) error {
		at, err := clockReadAt(stdout)
		if err != nil {
			return err
		}
		clockMu.Lock()
		*sink = append(*sink, at.Sub(start))
		clockMu.Unlock()
		return nil
	}
	clockStep := func(host *docker.Host, sink *[]time.Duration) func() error {
		return hostStep(host, clockImg.ID, []byte(`{"mode":"clock"}`), func(start time.Time, res *exechost.ExecResult) error {
			if res.ExitCode != 0 {
				return fmt.Errorf("clock tool: exit %d: %s %s", res.ExitCode, res.Stdout, res.Stderr)
			}
			return record(sink, start, res.Stdout)
		})
	}

	// The floor of that measure: the same tool started as plain processes
	// of this machine, 16 at once, no container (what starting 16 of this
	// tool costs on these cores).
	hostTool := filepath.Join(t.TempDir(), "testtool")
	build := exec.CommandContext(ctx, "go", "build", "-o", hostTool, "./tools/testtool")
	build.Dir = ".."
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	processStep := func(sink *[]time.Duration) func() error {
		return func() error {
			start := time.Now()
			cmd := exec.CommandContext(ctx, hostTool)
			cmd.Stdin = strings.NewReader(`{"mode":"clock"}`)
			stdout, err := cmd.Output()
			if err != nil {
				return fmt.Errorf("host testtool: %w", err)
			}
			return record(sink, start, stdout)
		}
	}
	var warmup, hoR, coR, poR []time.Duration
	require.NoError(t, clockStep(clockPool, &warmup)()) // a miss: teaches the key
	require.NoError(t, processStep(&warmup)())
	before = clockPool.PoolStats()
	for range rounds {
		require.Eventually(t, func() bool { return clockPool.PoolStats().Idle >= burst }, 2*time.Minute, 20*time.Millisecond)
		for _, f := range []func() error{processStep(&hoR), clockStep(cold, &coR), clockStep(clockPool, &poR)} {
			_, _, err := batch(burst, f)
			require.NoError(t, err)
		}
	}
	after = clockPool.PoolStats()
	fmt.Fprintf(&sb, "%-40s %10s %10s %10s %10s %10s %10s\n", "Provision start → tool read its input", q(hoR, 0.5), q(hoR, 0.99), q(coR, 0.5), q(coR, 0.99), q(poR, 0.5), q(poR, 0.99))
	fmt.Fprintf(&sb, "  (testtool clock mode; bare: the same tool as %d host processes at once, no container;\n   pool/bare p50 %.2f, p99 %.2f; pool hits %d/%d, launched %d)\n", burst,
		float64(durQuantile(poR, 0.5))/float64(durQuantile(hoR, 0.5)), float64(durQuantile(poR, 0.99))/float64(durQuantile(hoR, 0.99)),
		after.Hits-before.Hits, (after.Hits+after.Misses)-(before.Hits+before.Misses), after.Launched-before.Launched)
	t.Log(sb.String())
	fmt.Print(sb.String())
}

// clockReadAt is when testtool's clock mode had read its input.
func clockReadAt(stdout []byte) (time.Time, error) {
	var out struct {
		ReadAt string `json:"read_at_unix_nano"`
	}
	if err := json.Unmarshal(stdout, &out); err != nil {
		return time.Time{}, fmt.Errorf("clock tool output %q: %w", stdout, err)
	}
	ns, err := strconv.ParseInt(out.ReadAt, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("clock tool output %q: %w", stdout, err)
	}
	return time.Unix(0, ns), nil
}

// durQuantile is the nearest-rank q-quantile of d.
func durQuantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*q+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
