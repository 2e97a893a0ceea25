//go:build integration

package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/stretchr/testify/require"
	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/internal/devserver"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/internal/testenv"
	"github.com/agentflow/agentflow/worker"
	"github.com/agentflow/agentflow/workflows"
)

func benchRounds(def int) int {
	if v, err := strconv.Atoi(os.Getenv("AGENTFLOW_BENCH_ROUNDS")); err == nil && v > 0 {
		return v
	}
	return def
}

// benchKeyFile writes a shared checkpoint key file, as every worker on a
// shared store needs.
func benchKeyFile(t *testing.T) string {
	t.Helper()
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	p := filepath.Join(t.TempDir(), "checkpoint.keys")
	require.NoError(t, os.WriteFile(p, []byte("bench "+base64.StdEncoding.EncodeToString(secret)+"\n"), 0o600))
	return p
}

// minioStore starts MinIO (testenv.MinIO) and opens prefix of its bucket
// the way a worker does (objstore.Open with the AWS variables).
func minioStore(t *testing.T, prefix string) (*testenv.MinIOServer, objstore.Store) {
	t.Helper()
	srv := testenv.MinIO(t)
	s, err := objstore.Open(t.Context(), srv.StoreURL(prefix), srv.Getenv)
	require.NoError(t, err)
	return srv, s
}

// TestCheckpointStoreBench measures a checkpoint Put and a full Get (read
// and verified to the end) of 1, 10 and 100 MiB of content through the S3
// store (MinIO on loopback) against the local directory store, both behind
// signed manifests as a worker uses them, alternating in the same run.
//
//	AGENTFLOW_BENCH=1 go test -count=1 -tags integration -run TestCheckpointStoreBench -v ./bench/
func TestCheckpointStoreBench(t *testing.T) {
	if os.Getenv("AGENTFLOW_BENCH") != "1" {
		t.Skip("set AGENTFLOW_BENCH=1 to run the checkpoint store benchmark")
	}
	ctx := t.Context()
	keys, err := checkpoint.LoadKeyring(benchKeyFile(t))
	require.NoError(t, err)
	dir, err := objstore.NewDir(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = dir.Close() })
	_, s3 := minioStore(t, "bench")
	stores := []struct {
		name string
		s    checkpoint.Store
	}{
		{"local dir", mustSealed(t, dir, keys)},
		{"s3 (minio)", mustSealed(t, objstore.Sub(s3, "checkpoints"), keys)},
	}
	rounds := benchRounds(5)

	type key struct {
		store string
		size  int
		op    string
	}
	durs := map[key][]time.Duration{}
	sizes := []int{1, 10, 100}
	var seq int
	for _, mib := range sizes {
		content := make([]byte, mib<<20)
		_, _ = rand.Read(content)
		for r := range rounds + 1 { // round 0 warms up
			for _, st := range stores {
				seq++
				id := exechost.CheckpointID(fmt.Sprintf("ckpt-bench-%d", seq))
				start := time.Now()
				m, err := st.s.Put(ctx, checkpoint.Manifest{ID: id, ExecutionID: "bench", ImageDigest: "sha256:" + strings.Repeat("a", 64),
					Resources: sandboxLimits}, bytes.NewReader(content), nil)
				require.NoError(t, err)
				put := time.Since(start)
				require.EqualValues(t, len(content), m.SizeBytes)

				start = time.Now()
				_, rc, err := st.s.Get(ctx, id)
				require.NoError(t, err)
				n, err := io.Copy(io.Discard, rc)
				require.NoError(t, err, "verified to the end")
				require.NoError(t, rc.Close())
				get := time.Since(start)
				require.EqualValues(t, len(content), n)
				require.NoError(t, st.s.Delete(ctx, id))
				if r > 0 {
					durs[key{st.name, mib, "put"}] = append(durs[key{st.name, mib, "put"}], put)
					durs[key{st.name, mib, "get"}] = append(durs[key{st.name, mib, "get"}], get)
				}
			}
		}
	}

	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	var sb strings.Builder
	fmt.Fprintf(&sb, "\ncheckpoint put / get (verified) through the S3 store (MinIO, loopback) vs the local dir, sealed, median of %d\n", rounds)
	fmt.Fprintf(&sb, "%-8s %-4s %12s %12s %7s %12s %12s\n", "size", "op", "local dir", "s3", "ratio", "local MiB/s", "s3 MiB/s")
	for _, mib := range sizes {
		for _, op := range []string{"put", "get"} {
			l, s := median(durs[key{"local dir", mib, op}]), median(durs[key{"s3 (minio)", mib, op}])
			fmt.Fprintf(&sb, "%-8s %-4s %12s %12s %7.2f %12.0f %12.0f\n", fmt.Sprintf("%d MiB", mib), op, ms(l), ms(s),
				float64(s)/float64(l), float64(mib)/l.Seconds(), float64(mib)/s.Seconds())
		}
	}
	t.Log(sb.String())
	fmt.Print(sb.String())
}

func mustSealed(t *testing.T, s objstore.Store, keys *checkpoint.Keyring) checkpoint.Store {
	t.Helper()
	sealed, err := checkpoint.NewSealed(checkpoint.NewObject(s), keys, checkpoint.SealedOptions{})
	require.NoError(t, err)
	return sealed
}

// TestEngineStoreBench measures an engine step (Temporal + AgentWorkflow +
// RunStep, real Docker host) with the S3 store (MinIO) against the same
// with local directories. One dev server, two in-process workers — one per
// store, each on its own task queue — and, alternating for a few rounds,
// one linear run of n echo steps on each (every step after the first
// restores the previous step's checkpoint, so every step pays a checkpoint
// upload and a download).
//
//	AGENTFLOW_BENCH=1 go test -count=1 -tags integration -run TestEngineStoreBench -v ./bench/
func TestEngineStoreBench(t *testing.T) {
	if os.Getenv("AGENTFLOW_BENCH") != "1" {
		t.Skip("set AGENTFLOW_BENCH=1 to run the engine store benchmark")
	}
	dc, img := benchDocker(t)
	ctx := t.Context()
	bin := testenv.TemporalBinary(t)
	n := 6
	if v, err := strconv.Atoi(os.Getenv("AGENTFLOW_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	rounds := benchRounds(3)
	benchLabel := fmt.Sprintf("store-bench-%d-%d", os.Getpid(), time.Now().UnixNano())
	labels := map[string]string{"agentflow.test": "1", "agentflow.bench": benchLabel}
	tmp := t.TempDir()

	minio := testenv.MinIO(t)
	for _, kv := range minio.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v) // the worker reads the AWS variables from its environment
	}

	srvLog, err := os.Create(filepath.Join(tmp, "temporal.log"))
	require.NoError(t, err)
	defer srvLog.Close()
	srv, err := devserver.Start(ctx, devserver.Options{
		Bin: bin, Port: freePort(t), Headless: true,
		DBFile: filepath.Join(tmp, "temporal.db"), Stdout: srvLog, Stderr: srvLog,
	})
	require.NoError(t, err, "start dev server")
	defer func() { _ = srv.Stop(15 * time.Second) }()

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	keyFile := benchKeyFile(t)
	type pool struct {
		name, queue string
		cfg         worker.Config
	}
	pools := []pool{
		{name: "local dirs", queue: benchLabel + "-local"},
		{name: "s3 (minio)", queue: benchLabel + "-s3"},
	}
	for i := range pools {
		d := filepath.Join(tmp, fmt.Sprintf("worker-%d", i))
		pools[i].cfg = worker.Config{
			Address: srv.Address, TaskQueue: pools[i].queue, HealthAddr: "-", MetricsAddr: "-",
			MaxConcurrentSteps: 2, CheckpointKeyFile: keyFile,
			CheckpointDir: filepath.Join(d, "checkpoints"), LogDir: filepath.Join(d, "logs"), ResultDir: filepath.Join(d, "results"),
			StopTimeout: 10 * time.Second, Logger: logger, SandboxLabels: labels,
		}
	}
	pools[1].cfg.Store = minio.StoreURL("engine-bench")

	wctx, stopWorkers := context.WithCancel(context.Background())
	done := make(chan error, len(pools))
	for _, p := range pools {
		ready := make(chan worker.Ready, 1)
		cfg := p.cfg
		cfg.OnReady = func(r worker.Ready) { ready <- r }
		go func() { done <- worker.Run(wctx, cfg) }()
		select {
		case <-ready:
		case err := <-done:
			stopWorkers()
			t.Fatalf("worker %s exited during start: %v", p.name, err)
		case <-time.After(2 * time.Minute):
			stopWorkers()
			t.Fatalf("worker %s did not become ready", p.name)
		}
	}
	defer func() {
		stopWorkers()
		for range pools {
			require.NoError(t, <-done)
		}
		require.Eventually(t, func() bool {
			l, err := dc.ContainerList(context.Background(), container.ListOptions{All: true,
				Filters: filters.NewArgs(filters.Arg("label", "agentflow.bench="+benchLabel))})
			return err == nil && len(l) == 0
		}, 20*time.Second, 200*time.Millisecond, "sandboxes left behind")
	}()

	c, err := tclient.Dial(tclient.Options{HostPort: srv.Address, Logger: tlog.NewStructuredLogger(logger)})
	require.NoError(t, err)
	defer c.Close()

	plan := func(steps int) spec.Plan { return echoChain("bench-store", img.ID, steps) }
	var runSeq int
	runPlan := func(queue string, p spec.Plan) (time.Duration, []time.Duration) {
		runSeq++
		id := fmt.Sprintf("%s-%d", queue, runSeq)
		start := time.Now()
		run, err := startAgent(ctx, c, queue, id, p)
		require.NoError(t, err)
		var res workflows.Result
		require.NoError(t, run.Get(ctx, &res))
		wall := time.Since(start)
		require.Equal(t, workflows.RunSucceeded, res.Status, res.Error)
		v, err := c.QueryWorkflow(ctx, id, run.GetRunID(), workflows.StatusQuery)
		require.NoError(t, err)
		var st workflows.Status
		require.NoError(t, v.Get(&st))
		require.Len(t, st.StepHistory, len(p.Steps))
		var steps []time.Duration
		for _, r := range st.StepHistory {
			require.Equal(t, workflows.StepSuccess, r.Status, r.ID)
			require.EqualValues(t, 1, r.Attempts, "%s ran more than once: the numbers would lie", r.ID)
			steps = append(steps, time.Duration(r.DurationMS)*time.Millisecond)
		}
		return wall, steps
	}

	for _, p := range pools { // warm up both pools
		runPlan(p.queue, plan(1))
	}
	steps := map[string][]time.Duration{}
	walls := map[string][]time.Duration{}
	for range rounds {
		for _, p := range pools {
			w, s := runPlan(p.queue, plan(n))
			steps[p.name] = append(steps[p.name], s...)
			walls[p.name] = append(walls[p.name], w/time.Duration(n))
		}
	}
	// The S3 pool really used the bucket: its checkpoints are there.
	s3, err := objstore.Open(ctx, minio.StoreURL("engine-bench"), minio.Getenv)
	require.NoError(t, err)
	objs, err := s3.List(ctx, "checkpoints/")
	require.NoError(t, err)
	require.NotEmpty(t, objs, "the s3 worker's checkpoints are in the bucket")

	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	base := pools[0].name
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nengine step with the S3 store (MinIO, loopback) vs local directories (image %s, %d rounds × %d chained steps)\n",
		sandboxBenchImage, rounds, n)
	fmt.Fprintf(&sb, "%-12s %16s %11s %16s %11s\n", "store", "step (workflow)", "ratio", "run wall / n", "ratio")
	for _, p := range pools {
		fmt.Fprintf(&sb, "%-12s %16s %11.2f %16s %11.2f\n", p.name,
			ms(median(steps[p.name])), float64(median(steps[p.name]))/float64(median(steps[base])),
			ms(median(walls[p.name])), float64(median(walls[p.name]))/float64(median(walls[base])))
	}
	t.Log(sb.String())
	fmt.Print(sb.String())
}
