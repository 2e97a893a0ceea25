//go:build integration

package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	dockerclient "github.com/docker/docker/client"
	"github.com/stretchr/testify/require"
	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/internal/devserver"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/internal/testenv"
	"github.com/agentflow/agentflow/worker"
	"github.com/agentflow/agentflow/workflows"
)

// TestEngineStepBench measures what Temporal + AgentWorkflow + the RunStep
// activity add on top of the raw sandbox cycle. In one run it starts a dev
// server and an in-process worker (real Docker host), then alternates, for a
// few rounds:
//
//   - baseline: n direct ExecutionHost cycles (provision → exec of
//     agentflow/tool-echo:1.0 with 1 KiB JSON → checkpoint → terminate),
//     exactly the sandbox bench's "ours";
//   - measured: one AgentWorkflow run of a linear plan of n echo steps with
//     the same input and limits, each depending on the previous (so every
//     step but the first restores the previous checkpoint); per-step time =
//     run wall / n, and the workflow's own per-step durations for a median;
//   - a fan-out plan (root → 4 parallel children → join) against the same
//     shape driven directly on the host (1, then 4 at once, then 1).
//
// Run it with:
//
//	AGENTFLOW_BENCH=1 go test -count=1 -tags integration -run TestEngineStepBench -v ./bench/
func TestEngineStepBench(t *testing.T) {
	if os.Getenv("AGENTFLOW_BENCH") != "1" {
		t.Skip("set AGENTFLOW_BENCH=1 to run the engine benchmark")
	}
	dc, img := benchDocker(t)
	ctx := t.Context()
	bin := testenv.TemporalBinary(t)

	n := 8
	if v, err := strconv.Atoi(os.Getenv("AGENTFLOW_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	const rounds = 2
	// Every container of this run carries benchLabel, so the end check
	// sees only ours even if other suites share the daemon.
	benchLabel := fmt.Sprintf("engine-bench-%d-%d", os.Getpid(), time.Now().UnixNano())
	labels := map[string]string{"agentflow.test": "1", "agentflow.bench": benchLabel}

	tmp := t.TempDir()
	srvLog, err := os.Create(filepath.Join(tmp, "temporal.log"))
	require.NoError(t, err)
	t.Cleanup(func() { srvLog.Close() })
	// devserver registers the search attributes and passes
	// system.enableActivityEagerExecution=true (devserver.DynamicConfig).
	// A SQLite file, as `agentctl dev` uses, rather than memory: the
	// persistence cost is part of what a real run pays.
	srv, err := devserver.Start(ctx, devserver.Options{
		Bin: bin, Port: freePort(t), Headless: true,
		DBFile: filepath.Join(tmp, "temporal.db"), Stdout: srvLog, Stderr: srvLog,
	})
	require.NoError(t, err, "start dev server")
	// A cleanup, not a defer: the worker's cleanup (startBenchWorker)
	// must run first.
	t.Cleanup(func() { _ = srv.Stop(15 * time.Second) })

	c := startBenchWorker(t, dc, srv.Address, tmp, 4, benchLabel, labels, nil)

	// Baseline: a host of our own, the same cycle as TestSandboxCycleBench.
	store, err := sealedStore(filepath.Join(tmp, "bench-checkpoints"))
	require.NoError(t, err)
	host, err := docker.New(docker.Options{Client: dc, Store: store})
	require.NoError(t, err)
	payload := payload1K()
	var seq int
	var seqMu sync.Mutex
	nextID := func() exechost.ExecutionID {
		seqMu.Lock()
		defer seqMu.Unlock()
		seq++
		return exechost.ExecutionID(fmt.Sprintf("%s-%d", benchLabel, seq))
	}
	// cycle is one sandbox step on the host directly; from are the
	// checkpoints the workspace is restored from, layered in order (what a
	// step with dependencies gets). The caller deletes the returned
	// checkpoint.
	cycle := func(from ...exechost.CheckpointID) (exechost.CheckpointID, error) {
		return echoCycle(ctx, host, store, nextID(), img.ID, labels, payload, from...)
	}
	// plain is the sandbox bench's "ours": a fresh workspace, checkpoint
	// discarded.
	plain := func() error {
		ck, err := cycle()
		if err == nil {
			err = store.Delete(context.Background(), ck)
		}
		return err
	}
	// Steps get the same input (the payload's object) and limits as the
	// baseline cycle.
	step := func(id string, deps ...string) spec.PlanStep { return echoStep(img.ID, id, deps...) }
	linear := echoChain("bench-linear", img.ID, n)
	fanout := spec.Plan{SchemaVersion: spec.PlanSchemaVersion, Name: "bench-fanout", Version: "1.0.0",
		Steps: []spec.PlanStep{step("root")}}
	var children []string
	for i := range 4 {
		id := fmt.Sprintf("c%d", i)
		children = append(children, id)
		fanout.Steps = append(fanout.Steps, step(id, "root"))
	}
	fanout.Steps = append(fanout.Steps, step("join", children...))

	var runSeq int
	// runPlan executes p as one AgentWorkflow run, submitted as agentctl
	// does, and returns its wall time and the workflow's per-step durations.
	runPlan := func(p spec.Plan) (time.Duration, []time.Duration) {
		runSeq++
		id := fmt.Sprintf("%s-%s-%d", benchLabel, p.Name, runSeq)
		start := time.Now()
		run, err := startAgent(ctx, c, workflows.TaskQueue, id, p)
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
			// Every step ran once: a retry would make the numbers lie.
			require.EqualValues(t, 1, r.Attempts, r.ID)
			steps = append(steps, time.Duration(r.DurationMS)*time.Millisecond)
		}
		return wall, steps
	}
	deleteAll := func(cks []exechost.CheckpointID) {
		for _, ck := range cks {
			require.NoError(t, store.Delete(context.Background(), ck))
		}
	}
	// hostFanout drives the fan-out plan's shape on the host: the root, 4
	// children at once restoring the root's checkpoint, the join restoring
	// the 4 children's.
	hostFanout := func() time.Duration {
		start := time.Now()
		root, err := cycle()
		require.NoError(t, err)
		kids := make([]exechost.CheckpointID, 4)
		_, _, err = batch(4, func() error {
			ck, err := cycle(root)
			if err != nil {
				return err
			}
			seqMu.Lock()
			kids[slices.Index(kids, "")] = ck
			seqMu.Unlock()
			return nil
		})
		require.NoError(t, err)
		join, err := cycle(kids...)
		require.NoError(t, err)
		wall := time.Since(start)
		deleteAll(append(kids, root, join))
		return wall
	}

	// Warm up both paths once (image layers, page cache, workflow and
	// activity pollers, the server's first-run caches).
	require.NoError(t, plain())
	runPlan(spec.Plan{SchemaVersion: spec.PlanSchemaVersion, Name: "bench-warmup", Version: "1.0.0",
		Steps: []spec.PlanStep{step("w")}})

	// Alternate baseline and engine so drift hits both alike.
	var hostD, chainD, engD, engWfD []time.Duration
	var engWall, hostFanW, engFanW time.Duration
	for range rounds {
		for range n {
			s := time.Now()
			require.NoError(t, plain())
			hostD = append(hostD, time.Since(s))
		}
		// The linear plan's shape on the host: each cycle restores the
		// previous one's checkpoint. Separates the restore the engine's
		// steps pay from what Temporal and the workflow add.
		var prev []exechost.CheckpointID
		for range n {
			s := time.Now()
			ck, err := cycle(prev...)
			require.NoError(t, err)
			chainD = append(chainD, time.Since(s))
			deleteAll(prev)
			prev = []exechost.CheckpointID{ck}
		}
		deleteAll(prev)
		w, steps := runPlan(linear)
		engWall += w
		engWfD = append(engWfD, steps...)
		for range n {
			engD = append(engD, w/time.Duration(n))
		}
		hostFanW += hostFanout()
		w, _ = runPlan(fanout)
		engFanW += w
	}

	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	hostMed, hostMean := median(hostD), mean(hostD)
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nengine step (Temporal + AgentWorkflow + RunStep) vs direct sandbox cycle (image %s, 1 KiB JSON, %d rounds × %d steps)\n",
		sandboxBenchImage, rounds, n)
	fmt.Fprintf(&sb, "%-44s %9s %9s %11s %10s %11s %10s\n", "per step", "median", "mean", "ratio(med)", "Δ median", "ratio(mean)", "Δ mean")
	for _, r := range []struct {
		name string
		d    []time.Duration
	}{
		{"host cycle, fresh workspace (baseline)", hostD},
		{"host cycle, restoring previous checkpoint", chainD},
		{"engine step, duration recorded by workflow", engWfD},
		{"engine step, linear run wall / n", engD},
	} {
		med, avg := median(r.d), mean(r.d)
		fmt.Fprintf(&sb, "%-44s %9s %9s %11.2f %10s %11.2f %10s\n", r.name, ms(med), ms(avg),
			float64(med)/float64(hostMed), ms(med-hostMed), float64(avg)/float64(hostMean), ms(avg-hostMean))
	}
	fmt.Fprintf(&sb, "linear run wall (mean of %d): %s for %d steps\n", rounds, ms(engWall/rounds), n)
	fmt.Fprintf(&sb, "fan-out root→4→join (mean of %d): engine run %s, same shape direct on host (with restores) %s, ratio %.2f\n",
		rounds, ms(engFanW/rounds), ms(hostFanW/rounds), float64(engFanW)/float64(hostFanW))
	t.Log(sb.String())
	fmt.Print(sb.String())
}

// freePort asks the kernel for a free loopback port. Another process could
// take it before the server binds it; devserver.Start then fails clearly.
func freePort(t *testing.T) int { return testenv.FreePort(t) }

func mean(d []time.Duration) time.Duration {
	var s time.Duration
	for _, x := range d {
		s += x
	}
	return s / time.Duration(len(d))
}

// startBenchWorker runs an in-process worker (real Docker host, conc steps
// at once, sandboxes labelled; mutate, when set, adjusts its
// configuration, e.g. its task queue) on the server at address until the
// test ends, then checks that no sandbox carrying agentflow.bench=label is
// left; it returns a client of the server.
func startBenchWorker(t *testing.T, dc *dockerclient.Client, address, tmp string, conc int, label string, labels map[string]string,
	mutate func(*worker.Config)) tclient.Client {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	wctx, stopWorker := context.WithCancel(context.Background())
	ready := make(chan worker.Ready, 1)
	done := make(chan error, 1)
	cfg := worker.Config{
		Address:            address,
		HealthAddr:         "-",
		MetricsAddr:        "-",
		MaxConcurrentSteps: conc,
		CheckpointDir:      filepath.Join(tmp, "worker-checkpoints"),
		LogDir:             filepath.Join(tmp, "logs"),
		StopTimeout:        10 * time.Second,
		Logger:             logger,
		SandboxLabels:      labels,
		OnReady:            func(r worker.Ready) { ready <- r },
	}
	if mutate != nil {
		mutate(&cfg)
	}
	go func() { done <- worker.Run(wctx, cfg) }()
	select {
	case <-ready:
	case err := <-done:
		stopWorker()
		t.Fatalf("worker exited during start: %v", err)
	case <-time.After(2 * time.Minute):
		stopWorker()
		t.Fatal("worker did not become ready")
	}
	c, err := tclient.Dial(tclient.Options{HostPort: address, Logger: tlog.NewStructuredLogger(logger)})
	require.NoError(t, err)
	// Cleanups run last-in first-out: the client closes, the worker
	// stops, then no sandbox of this run may be left.
	t.Cleanup(func() {
		stopWorker()
		require.NoError(t, <-done)
		require.Eventually(t, func() bool {
			l, err := dc.ContainerList(context.Background(), container.ListOptions{All: true,
				Filters: filters.NewArgs(filters.Arg("label", "agentflow.bench="+label))})
			return err == nil && len(l) == 0
		}, 20*time.Second, 200*time.Millisecond, "sandboxes left behind")
	})
	t.Cleanup(c.Close)
	return c
}
