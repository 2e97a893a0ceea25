// Command loadworker is the worker of the load harness (bench/load_test.go,
// make load), a separate process so its CPU time and memory can be read:
//
//   - -mode engine: an agentflow worker (AgentWorkflow, RunStep, the
//     stores, logs, metrics) whose sandbox host is bench/noophost, which
//     runs NOTHING: orchestration load only, never a real step;
//   - -mode bare: a plain Temporal worker of loadbase's workflow of K
//     no-op activities, with the same activity concurrency (the floor),
//     and of the floor with extras (loadbase.Extended).
//
// It runs until SIGTERM, then (engine) writes the no-op host's counts as
// JSON to -stats-file. With -journal, every tool run is also appended to a
// file at once, so a process killed with -9 leaves its count behind.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/bench/loadbase"
	"github.com/agentflow/agentflow/bench/noophost"
	"github.com/agentflow/agentflow/worker"
)

func main() {
	address := flag.String("address", "127.0.0.1:7233", "Temporal frontend")
	queue := flag.String("task-queue", "load", "task queue")
	mode := flag.String("mode", "engine", "engine (agentflow worker, no-op host) | bare (loadbase workflow)")
	conc := flag.Int("max-concurrent", 4, "activities (steps) at once")
	dataDir := flag.String("data-dir", "", "engine: checkpoints, logs and results (required)")
	statsFile := flag.String("stats-file", "", "engine: write the no-op host's counts here on exit")
	failRate := flag.Float64("fail-rate", 0, "engine: probability that a tool attempt fails")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
	journal := flag.String("journal", "", "engine: append one line per tool run (its execution ID) to this file (chaos runs)")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadworker:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "loadworker:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var err error
	switch *mode {
	case "engine":
		err = engine(ctx, log, *address, *queue, *conc, *dataDir, *statsFile, *journal, *failRate)
	case "bare":
		err = bare(ctx, *address, *queue, *conc)
	default:
		err = fmt.Errorf("unknown -mode %q", *mode)
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "loadworker:", err)
		os.Exit(1)
	}
}

func engine(ctx context.Context, log *slog.Logger, address, queue string, conc int, dir, statsFile, journal string, failRate float64) error {
	if dir == "" {
		return fmt.Errorf("-data-dir is required")
	}
	h := noophost.New()
	h.FailRate = failRate
	if journal != "" {
		f, err := os.OpenFile(journal, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		h.Journal = f
	}
	err := worker.Run(ctx, worker.Config{
		Address: address, TaskQueue: queue, HealthAddr: "-", MetricsAddr: "127.0.0.1:0",
		MaxConcurrentSteps: conc,
		CheckpointDir:      filepath.Join(dir, "checkpoints"),
		LogDir:             filepath.Join(dir, "logs"),
		Logger:             log,
		Backend: &worker.Backend{
			Host:        h,
			Ping:        func(context.Context) error { return nil },
			Reap:        func(context.Context) (int, error) { return 0, nil },
			Checkpoints: h,
		},
		OnReady: func(r worker.Ready) {
			fmt.Println("loadworker metrics http://" + r.MetricsAddr + "/metrics")
			fmt.Println("loadworker ready")
		},
	})
	if statsFile != "" {
		b, _ := json.Marshal(h.Stats())
		if werr := os.WriteFile(statsFile, b, 0o644); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

func bare(ctx context.Context, address, queue string, conc int) error {
	c, err := client.Dial(client.Options{HostPort: address})
	if err != nil {
		return err
	}
	defer c.Close()
	// The same Temporal worker options as an agentflow worker's.
	w := sdkworker.New(c, queue, worker.TemporalOptions(conc, worker.DefaultStopTimeout))
	w.RegisterWorkflowWithOptions(loadbase.Workflow, workflow.RegisterOptions{Name: loadbase.WorkflowName})
	w.RegisterActivityWithOptions(loadbase.Activity, activity.RegisterOptions{Name: loadbase.ActivityName})
	w.RegisterWorkflowWithOptions(loadbase.Extended, workflow.RegisterOptions{Name: loadbase.ExtendedName})
	w.RegisterActivityWithOptions(loadbase.ExtendedActivity, activity.RegisterOptions{Name: loadbase.ExtendedActivityName})
	if err := w.Start(); err != nil {
		return err
	}
	fmt.Println("loadworker ready")
	<-ctx.Done()
	w.Stop()
	return nil
}
