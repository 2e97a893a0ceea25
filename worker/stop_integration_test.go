//go:build integration

package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/exechost/hosttest"
	"github.com/agentflow/agentflow/internal/devserver"
	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/internal/testenv"
	"github.com/agentflow/agentflow/worker"
	"github.com/agentflow/agentflow/workflows"
)

const slowImage = "sha256:5100000000000000000000000000000000000000000000000000000000000000"

// A worker stopped while steps run longer than its stop timeout destroys
// every sandbox and reports every attempt (SandboxLost, "handed back", so
// Temporal retries it elsewhere) before Run returns: nothing is left for a
// heartbeat timeout to find, no sandbox outlives the worker.
func TestStopHandsBackRunningSteps(t *testing.T) {
	bin := testenv.TemporalBinary(t)
	srv, err := devserver.Start(t.Context(), devserver.Options{Bin: bin, Port: testenv.FreePort(t), Headless: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop(15 * time.Second) })

	const steps = 4
	started := make(chan string, steps)
	fake, err := hosttest.NewFake(hosttest.Options{Handler: func(ctx context.Context, x hosttest.ExecContext) hosttest.Result {
		if x.Argv[0] != "/bin/tool" {
			return hosttest.DefaultHandler(ctx, x)
		}
		started <- string(x.ExecutionID)
		<-ctx.Done()
		// The tool's SIGTERM grace: the sandbox is still there for a
		// moment after the abort, as on a real host.
		time.Sleep(300 * time.Millisecond)
		return hosttest.Result{ExitCode: 143}
	}})
	require.NoError(t, err)

	var yaml strings.Builder
	yaml.WriteString("name: stop-test\nversion: \"1.0.0\"\nsteps:\n")
	for i := range steps {
		fmt.Fprintf(&yaml, "  - id: slow%d\n    image: %s\n    timeout: 10m\n", i, slowImage)
	}
	plan, err := spec.Load("stop.yaml", []byte(yaml.String()))
	require.NoError(t, err)

	queue := fmt.Sprintf("stop-test-%d", os.Getpid())
	wctx, stopWorker := context.WithCancel(context.Background())
	defer stopWorker()
	done := make(chan error, 1)
	go func() {
		done <- worker.Run(wctx, worker.Config{
			Address: srv.Address, TaskQueue: queue, HealthAddr: "-", MetricsAddr: "-",
			MaxConcurrentSteps: steps, StopTimeout: time.Second, Identity: "stopping-worker",
			CheckpointDir: t.TempDir(), LogDir: t.TempDir(),
			Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
			Backend: &worker.Backend{Host: fake, Ping: func(context.Context) error { return nil }},
		})
	}()

	c, err := client.Dial(client.Options{HostPort: srv.Address})
	require.NoError(t, err)
	defer c.Close()
	run, err := c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: "stop-test", TaskQueue: queue},
		workflows.WorkflowName, workflows.Input{Plan: *plan})
	require.NoError(t, err)

	for range steps {
		select {
		case <-started:
		case err := <-done:
			t.Fatalf("worker exited early: %v", err)
		case <-time.After(2 * time.Minute):
			t.Fatal("the steps did not start")
		}
	}
	stopWorker()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(3 * time.Minute):
		t.Fatal("worker did not stop")
	}

	// Everything below was true when Run returned.
	st := fake.Stats()
	require.Zero(t, st.Live, "no sandbox outlives the worker")
	require.Equal(t, steps, st.Provisioned)

	handedBack := map[string]bool{} // activity ID → reported handed back
	check := func(typ, msg, id string) {
		if typ == failure.SandboxLost && strings.Contains(msg, "worker stopping-worker stopped before the attempt finished; handed back") {
			handedBack[id] = true
		}
	}
	scheduled := map[int64]string{}
	it := c.GetWorkflowHistory(t.Context(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[ev.GetEventId()] = a.GetActivityId()
		}
		if a := ev.GetActivityTaskFailedEventAttributes(); a != nil {
			f := a.GetFailure()
			check(f.GetApplicationFailureInfo().GetType(), f.GetMessage(), scheduled[a.GetScheduledEventId()])
		}
	}
	// An attempt the server retries itself shows as pending, with the
	// handed-back failure as its last one.
	desc, err := c.DescribeWorkflowExecution(t.Context(), run.GetID(), run.GetRunID())
	require.NoError(t, err)
	for _, p := range desc.GetPendingActivities() {
		f := p.GetLastFailure()
		check(f.GetApplicationFailureInfo().GetType(), f.GetMessage(), p.GetActivityId())
	}
	require.Len(t, handedBack, steps, "every running attempt was reported handed back: %v", handedBack)
}
