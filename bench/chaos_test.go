//go:build load

package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/bench/noophost"
	"github.com/agentflow/agentflow/internal/devserver"
	"github.com/agentflow/agentflow/internal/testenv"
)

// TestChaosAtScale is the load harness's run under faults (make chaos):
// AGENTFLOW_CHAOS_AGENTS (1200) agents × 5 steps on two or more engine
// workers (bench/cmd/loadworker, no-op host: orchestration only) of one
// task queue, while
//
//   - every AGENTFLOW_CHAOS_KILL_EVERY (30s) one worker, in turn, is
//     killed with SIGKILL and a new one starts in its place;
//   - once, when about a third of the runs have closed, the Temporal
//     server goes away for AGENTFLOW_CHAOS_OUTAGE (60s) and comes back on
//     the same port with the same SQLite file.
//
// It requires: every run closed within the bound and SUCCEEDED (0 lost,
// 0 failed), 0 client errors, 0 double executions — every worker process
// journals each tool run's execution ID (one per step attempt) to a file
// that survives its kill -9, and no ID may appear twice across all of
// them — and 0 sandboxes left by the workers that exit gracefully at the
// end (the no-op host's live count; a killed worker's sandboxes are the
// reaper's, proven with real containers in tests/chaos_worker_e2e_test.go).
//
//	AGENTFLOW_LOAD=1 go test -tags load -count=1 -timeout 60m -run TestChaosAtScale -v ./bench/
func TestChaosAtScale(t *testing.T) {
	if os.Getenv("AGENTFLOW_LOAD") != "1" {
		t.Skip("set AGENTFLOW_LOAD=1 to run the load harness")
	}
	agents := envInt("AGENTFLOW_CHAOS_AGENTS", 1200)
	nWorkers := max(2, envInt("AGENTFLOW_CHAOS_WORKERS", 2))
	killEvery := envDuration(t, "AGENTFLOW_CHAOS_KILL_EVERY", 30*time.Second)
	outage := envDuration(t, "AGENTFLOW_CHAOS_OUTAGE", 60*time.Second)
	const steps = 5
	ctx := t.Context()
	tmp := t.TempDir()
	bin := buildLoadWorker(t, tmp)

	// A dev server on a file, so it can go away and come back with
	// everything it had.
	logf, err := os.Create(filepath.Join(tmp, "temporal.log"))
	require.NoError(t, err)
	t.Cleanup(func() { logf.Close() })
	sopts := devserver.Options{Bin: testenv.TemporalBinary(t), Port: testenv.FreePort(t), Headless: true,
		DBFile: filepath.Join(tmp, "temporal.db"), Stdout: logf, Stderr: logf}
	var srv *devserver.Server
	startServer := func() {
		require.Eventually(t, func() bool {
			s, err := devserver.Start(context.Background(), sopts)
			srv = s
			return err == nil
		}, 2*time.Minute, time.Second, "start dev server on port %d", sopts.Port)
	}
	startServer()
	t.Cleanup(func() {
		if srv != nil {
			_ = srv.Stop(15 * time.Second)
		}
	})
	address := srv.Address
	c, err := tclient.Dial(tclient.Options{HostPort: address})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	env := &loadEnv{c: c}

	queue := fmt.Sprintf("chaos-%d", time.Now().UnixNano())
	pool := &chaosPool{t: t, bin: bin, dir: filepath.Join(tmp, "workers"), address: address, queue: queue}
	for range nWorkers {
		pool.start()
	}
	t.Cleanup(pool.killAll)

	plan := loadPlan(t, steps, 2)
	ids := make([]string, agents)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", queue, i)
	}
	t0 := time.Now()

	// Faults run until every run has closed (or the test gives up).
	faultsDone := make(chan struct{})
	var closed atomic.Int64 // the latest count of closed runs
	var kills atomic.Int64
	var outageStart, outageEnd time.Time // read after faults.Wait
	var outageOver atomic.Bool
	var faults sync.WaitGroup
	faults.Go(func() {
		tick := time.NewTicker(killEvery)
		defer tick.Stop()
		for {
			select {
			case <-faultsDone:
				return
			case <-tick.C:
				pool.killOne()
				kills.Add(1)
				pool.start()
			}
		}
	})
	faults.Go(func() {
		for closed.Load() < int64(agents/3) {
			select {
			case <-faultsDone:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
		outageStart = time.Now()
		t.Logf("chaos: Temporal down at %s (%d runs closed)", time.Since(t0).Round(time.Second), closed.Load())
		_ = srv.Stop(15 * time.Second)
		srv = nil
		time.Sleep(outage)
		startServer()
		outageEnd = time.Now()
		outageOver.Store(true)
		t.Logf("chaos: Temporal back at %s", time.Since(t0).Round(time.Second))
	})

	// Submit with bounded in-flight starts; a start refused for load or
	// outage is retried (startWithRetry), so none is a client error.
	var clientErrors atomic.Int64
	var retries atomic.Int64
	var submitted sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, id := range ids {
		sem <- struct{}{}
		submitted.Go(func() {
			defer func() { <-sem }()
			_, err := startWithRetry(ctx, func(ctx context.Context) (tclient.WorkflowRun, error) {
				return env.startAgent(ctx, id, queue, plan)
			}, &retries)
			if err != nil {
				clientErrors.Add(1)
				t.Logf("start %s: %v", id, err)
			}
		})
	}
	submitted.Wait()
	t.Logf("chaos: %d submitted in %s (%d start retries)", agents, time.Since(t0).Round(time.Second), retries.Load())

	// Wait for every run to close, through the outage: a visibility count
	// that fails while the server is away is simply asked again.
	bound := time.Duration(agents*steps)*200*time.Millisecond + outage + 10*time.Minute
	deadline := time.Now().Add(bound)
	query := fmt.Sprintf("TaskQueue = %q AND ExecutionStatus != 'Running'", queue)
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := c.CountWorkflow(cctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
		cancel()
		if err == nil {
			closed.Store(resp.GetCount())
			if resp.GetCount() >= int64(agents) && outageOver.Load() {
				break
			}
		}
		time.Sleep(2 * time.Second)
	}
	wall := time.Since(t0)
	close(faultsDone)
	faults.Wait()
	if srv == nil { // the test gave up during the outage
		startServer()
	}

	// Classify every run by the server's word.
	var lost, failed, succeeded atomic.Int64
	var lat []float64
	var mu sync.Mutex
	var wg sync.WaitGroup
	dsem := make(chan struct{}, 16)
	for _, id := range ids {
		dsem <- struct{}{}
		wg.Go(func() {
			defer func() { <-dsem }()
			var d *workflowservice.DescribeWorkflowExecutionResponse
			var err error
			for range 10 {
				if d, err = c.DescribeWorkflowExecution(ctx, id, ""); err == nil {
					break
				}
				time.Sleep(time.Second)
			}
			if err != nil {
				lost.Add(1)
				t.Logf("describe %s: %v", id, err)
				return
			}
			info := d.WorkflowExecutionInfo
			switch info.GetStatus() {
			case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
				succeeded.Add(1)
			case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
				lost.Add(1)
				return
			default:
				failed.Add(1)
				t.Logf("run %s closed %s", id, info.GetStatus())
			}
			mu.Lock()
			lat = append(lat, info.GetCloseTime().AsTime().Sub(info.GetStartTime().AsTime()).Seconds())
			mu.Unlock()
		})
	}
	wg.Wait()
	sort.Float64s(lat)

	// The surviving workers exit gracefully and report what they hold;
	// then every journal, of every worker process that ever ran, is read.
	live := pool.stopAll()
	dups, toolRuns, err := pool.duplicates()
	require.NoError(t, err)

	res := map[string]any{
		"agents": agents, "steps": steps, "workers": nWorkers, "kill_every_s": killEvery.Seconds(), "kills": kills.Load(),
		"outage_s": outageEnd.Sub(outageStart).Seconds(), "succeeded": succeeded.Load(), "failed": failed.Load(),
		"lost": lost.Load(), "client_errors": clientErrors.Load(), "start_retries": retries.Load(),
		"tool_runs": toolRuns, "duplicated_tool_runs": len(dups), "leftover_sandboxes": live,
		"worker_processes": pool.started, "wall_s": wall.Seconds(),
		"p50_s": quantile(lat, 0.5), "p95_s": quantile(lat, 0.95), "p99_s": quantile(lat, 0.99),
	}
	line, _ := json.Marshal(map[string]any{"time": time.Now().UTC().Format(time.RFC3339), "chaos_at_scale": res})
	fmt.Println(string(line))
	if out := os.Getenv("AGENTFLOW_LOAD_OUT"); out != "" {
		f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		_, _ = f.Write(append(line, '\n'))
		f.Close()
	}
	t.Logf("chaos at scale: %d × %d on %d workers, %d kill -9, Temporal down %.0fs: %d succeeded, %d failed, %d lost, %d client errors, %d tool runs, %d run twice, %d sandboxes left; wall %.0fs, run p50 %.1fs p99 %.1fs",
		agents, steps, nWorkers, kills.Load(), outageEnd.Sub(outageStart).Seconds(), succeeded.Load(), failed.Load(), lost.Load(),
		clientErrors.Load(), toolRuns, len(dups), live, wall.Seconds(), quantile(lat, 0.5), quantile(lat, 0.99))

	require.False(t, outageStart.IsZero(), "the outage never happened")
	require.Positive(t, kills.Load(), "no worker was killed: raise the load or lower AGENTFLOW_CHAOS_KILL_EVERY")
	require.Zero(t, lost.Load(), "runs not closed within %s", bound)
	require.Zero(t, failed.Load(), "runs that did not succeed")
	require.Zero(t, clientErrors.Load(), "client errors")
	require.Empty(t, dups, "tool attempts that ran twice (execution ID → runs)")
	require.Zero(t, live, "sandboxes left by the workers that exited gracefully")
	// Every step ran at least once: the journals saw the work (a journal
	// that recorded nothing would make the duplicate check vacuous).
	require.GreaterOrEqual(t, toolRuns, agents*steps)
}

// chaosPool is the set of loadworker processes of TestChaosAtScale: each
// process gets its own data directory, stats file and journal.
type chaosPool struct {
	t              *testing.T
	bin, dir       string
	address, queue string
	mu             sync.Mutex
	running        []*chaosProc
	journals       []string
	started        int
}

type chaosProc struct {
	cmd   *exec.Cmd
	stats string
	log   *os.File
}

func (p *chaosPool) start() {
	t := p.t
	p.mu.Lock()
	n := p.started
	p.started++
	p.mu.Unlock()
	dir := filepath.Join(p.dir, strconv.Itoa(n))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	journal := filepath.Join(dir, "journal")
	proc := &chaosProc{stats: filepath.Join(dir, "stats.json")}
	var err error
	proc.log, err = os.Create(filepath.Join(dir, "worker.log"))
	require.NoError(t, err)
	proc.cmd = exec.Command(p.bin, "-address", p.address, "-task-queue", p.queue, "-max-concurrent", "16",
		"-data-dir", dir, "-stats-file", proc.stats, "-journal", journal)
	proc.cmd.Stderr = proc.log
	stdout, err := proc.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, proc.cmd.Start())
	// Ready is not awaited: a replacement may start while the server is
	// away and will connect when it is back.
	go func() { _, _ = io.Copy(io.Discard, bufio.NewReader(stdout)) }()
	p.mu.Lock()
	p.running = append(p.running, proc)
	p.journals = append(p.journals, journal)
	p.mu.Unlock()
}

// killOne kills the oldest running worker with SIGKILL.
func (p *chaosPool) killOne() {
	p.mu.Lock()
	if len(p.running) == 0 {
		p.mu.Unlock()
		return
	}
	proc := p.running[0]
	p.running = p.running[1:]
	p.mu.Unlock()
	_ = proc.cmd.Process.Kill()
	_ = proc.cmd.Wait()
	proc.log.Close()
}

// stopAll stops the running workers gracefully (SIGTERM) and returns the
// sandboxes they still held.
func (p *chaosPool) stopAll() int {
	t := p.t
	p.mu.Lock()
	procs := p.running
	p.running = nil
	p.mu.Unlock()
	live := 0
	for _, proc := range procs {
		require.NoError(t, proc.cmd.Process.Signal(syscall.SIGTERM))
		err := proc.cmd.Wait()
		proc.log.Close()
		require.NoError(t, err, "worker exit (log %s)", proc.log.Name())
		b, err := os.ReadFile(proc.stats)
		require.NoError(t, err)
		var st noophost.Stats
		require.NoError(t, json.Unmarshal(b, &st))
		live += st.Live
	}
	return live
}

func (p *chaosPool) killAll() {
	p.mu.Lock()
	procs := p.running
	p.running = nil
	p.mu.Unlock()
	for _, proc := range procs {
		_ = proc.cmd.Process.Kill()
		_ = proc.cmd.Wait()
	}
}

// duplicates reads every journal of every process.
func (p *chaosPool) duplicates() (map[string]int, int, error) {
	var rs []io.Reader
	for _, j := range p.journals {
		f, err := os.Open(j)
		if os.IsNotExist(err) {
			continue // a process killed before its first tool run
		}
		if err != nil {
			return nil, 0, err
		}
		defer f.Close()
		rs = append(rs, f)
	}
	dup, lines, err := noophost.Duplicates(rs...)
	out := map[string]int{}
	for id, n := range dup {
		out[string(id)] = n
	}
	return out, lines, err
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, "%s", name)
	return d
}
