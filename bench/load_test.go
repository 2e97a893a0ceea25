//go:build load

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/bench/loadbase"
	"github.com/agentflow/agentflow/bench/noophost"
	"github.com/agentflow/agentflow/internal/devserver"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/internal/testenv"
	"github.com/agentflow/agentflow/workflows"
)

// TestLoad is the load harness (make load): N agents of K linear steps
// submitted to a dev server with at most INFLIGHT starts in flight (a start
// refused with ResourceExhausted, Unavailable or a deadline is retried with
// backoff, so a burst gets no client errors), first as loadbase's bare
// workflow of K no-op activities (the floor), then as AgentWorkflow runs on
// an agentflow worker whose host is bench/noophost (it runs nothing:
// orchestration only). Both workers are separate processes with the same
// activity concurrency. It prints a table and one JSON line per run:
// completed, lost (not closed within the bound), failed, client errors,
// duplicated tool executions, P50/P95/P99 run latency (server start →
// close), wall time, worker CPU-seconds and peak RSS, server CPU-seconds.
//
//	AGENTFLOW_LOAD=1 go test -tags load -count=1 -timeout 60m -run TestLoad -v ./bench/
//
// AGENTFLOW_LOAD_AGENTS (1200), _STEPS (5), _INFLIGHT (64), _CONCURRENCY
// (the workers' activity slots, 16), _OUT (append the JSON lines there),
// _PROFILE_DIR (a CPU profile of each phase's worker there), _PERF_DIR (a
// Linux perf profile of each phase's server there).
func TestLoad(t *testing.T) {
	if os.Getenv("AGENTFLOW_LOAD") != "1" {
		t.Skip("set AGENTFLOW_LOAD=1 to run the load harness")
	}
	cfg := loadConfigFromEnv(1200)
	env := startLoadEnv(t)
	plan := loadPlan(t, cfg.Steps, 0)
	results := runPhases(t, env, cfg, []loadPhaseSpec{
		floorPhase(cfg.Steps),
		enginePhase(plan),
	})
	report(t, cfg, results)
	for _, r := range results {
		require.Zero(t, r.Lost, "%s: lost runs", r.Name)
		require.Zero(t, r.ClientErrors, "%s: client errors", r.Name)
		require.Zero(t, r.Duplicated, "%s: tools ran twice", r.Name)
	}
}

// TestLoadAttribution: where the engine's cost over the floor goes. The
// floor (loadbase's bare workflow), then the floor with one thing an
// agentflow run asks of the server added at a time (loadbase.Extras: a
// heartbeat per activity, the status search-attribute upserts with the
// start's search attributes and memo, a version marker, an end local
// activity, step-sized payloads), then all of them, then the engine on
// the no-op host; each phase on its own fresh dev server. Read the worker's
// and the server's CPU together: on 2 cores they share the machine.
//
//	AGENTFLOW_LOAD=1 go test -tags load -count=1 -run TestLoadAttribution -v ./bench/
//
// AGENTFLOW_LOAD_AGENTS (600 here), _STEPS, _INFLIGHT, _CONCURRENCY as
// TestLoad; AGENTFLOW_LOAD_PAYLOAD (bytes of padding, 512).
func TestLoadAttribution(t *testing.T) {
	if os.Getenv("AGENTFLOW_LOAD") != "1" {
		t.Skip("set AGENTFLOW_LOAD=1 to run the load harness")
	}
	cfg := loadConfigFromEnv(600)
	pad := envInt("AGENTFLOW_LOAD_PAYLOAD", 512)
	env := startLoadEnv(t)
	plan := loadPlan(t, cfg.Steps, 0)
	status := workflows.SearchAttrStatus
	all := loadbase.Extras{Heartbeat: true, StatusUpserts: true, Version: true, EndLocal: true, PayloadBytes: pad}
	extras := func(name string, x loadbase.Extras) loadPhaseSpec {
		x.Steps, x.StatusKey = cfg.Steps, status
		return loadPhaseSpec{name, []string{"-mode", "bare"}, func(ctx context.Context, c tclient.Client, id, queue string) (tclient.WorkflowRun, error) {
			o := tclient.StartWorkflowOptions{ID: id, TaskQueue: queue}
			if x.StatusUpserts {
				// What an agentflow start carries (bench/agent_test.go).
				o.Memo = map[string]any{workflows.MemoSpecName: plan.Name, workflows.MemoSpecVersion: plan.Version}
				o.TypedSearchAttributes = temporal.NewSearchAttributes(
					temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrAgentName).ValueSet(id),
					temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrSpec).ValueSet(plan.Name),
					temporal.NewSearchAttributeKeyKeyword(status).ValueSet(workflows.RunPending))
			}
			return c.ExecuteWorkflow(ctx, o, loadbase.ExtendedName, x)
		}}
	}
	phases := []loadPhaseSpec{
		floorPhase(cfg.Steps),
		extras("+ heartbeat", loadbase.Extras{Heartbeat: true}),
		extras("+ status upserts", loadbase.Extras{StatusUpserts: true}),
		extras("+ version marker", loadbase.Extras{Version: true}),
		extras("+ end local activity", loadbase.Extras{EndLocal: true}),
		extras(fmt.Sprintf("+ %d B payloads", pad), loadbase.Extras{PayloadBytes: pad}),
		extras("+ all of them", all),
		enginePhase(plan),
	}
	results := runPhases(t, env, cfg, phases)
	report(t, cfg, results)
	for _, r := range results {
		require.Zero(t, r.Lost, "%s: lost runs", r.Name)
		require.Zero(t, r.Failed, "%s: failed runs", r.Name)
	}
}

// loadPhaseSpec is one phase of a load run: its worker's arguments and
// how a run starts.
type loadPhaseSpec struct {
	name  string
	args  []string
	start func(ctx context.Context, c tclient.Client, id, queue string) (tclient.WorkflowRun, error)
}

// floorPhase is the floor: loadbase's bare workflow of steps no-op
// activities.
func floorPhase(steps int) loadPhaseSpec {
	return loadPhaseSpec{"bare temporal", []string{"-mode", "bare"}, func(ctx context.Context, c tclient.Client, id, queue string) (tclient.WorkflowRun, error) {
		return c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: id, TaskQueue: queue}, loadbase.WorkflowName, steps)
	}}
}

// enginePhase is AgentWorkflow runs of plan on the no-op host, started as
// the CLI starts them.
func enginePhase(plan spec.Plan) loadPhaseSpec {
	return loadPhaseSpec{"agentflow, no-op host", []string{"-mode", "engine"}, func(ctx context.Context, c tclient.Client, id, queue string) (tclient.WorkflowRun, error) {
		return startAgent(ctx, c, queue, id, plan)
	}}
}

// runPhases runs phases one after the other, each on an empty dev server
// (the first on env's own): a later phase never pays for an earlier one's
// histories and visibility rows.
func runPhases(t *testing.T, env *loadEnv, cfg loadConfig, phases []loadPhaseSpec) []loadResult {
	t.Helper()
	var results []loadResult
	for i, ph := range phases {
		if i > 0 {
			env.freshServer(t)
		}
		c := env.c
		results = append(results, runLoadPhase(t, env, ph.name, ph.args, cfg, func(ctx context.Context, id, queue string) (tclient.WorkflowRun, error) {
			return ph.start(ctx, c, id, queue)
		}, nil))
	}
	return results
}

// loadEnv is a dev server, a client of it and the loadworker binary.
type loadEnv struct {
	srv    *devserver.Server
	c      tclient.Client
	worker string
	tmp    string
}

func startLoadEnv(t *testing.T) *loadEnv {
	t.Helper()
	e := &loadEnv{tmp: t.TempDir()}
	e.worker = buildLoadWorker(t, e.tmp)
	e.freshServer(t)
	return e
}

// freshServer replaces e's dev server (if any) with a new, empty one, so
// a phase never runs against the histories and visibility rows of the
// phases before it.
func (e *loadEnv) freshServer(t *testing.T) {
	t.Helper()
	if e.srv != nil {
		e.c.Close()
		_ = e.srv.Stop(30 * time.Second)
	}
	srv, err := devserver.Start(t.Context(), devserver.Options{Bin: testenv.TemporalBinary(t), Port: testenv.FreePort(t), Headless: true})
	require.NoError(t, err)
	c, err := tclient.Dial(tclient.Options{HostPort: srv.Address})
	if err != nil {
		_ = srv.Stop(30 * time.Second)
		require.NoError(t, err)
	}
	if e.srv == nil {
		t.Cleanup(func() {
			e.c.Close()
			_ = e.srv.Stop(30 * time.Second)
		})
	}
	e.srv, e.c = srv, c
}

// buildLoadWorker builds bench/cmd/loadworker into dir.
func buildLoadWorker(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "loadworker")
	build := exec.Command("go", "build", "-o", bin, "./bench/cmd/loadworker")
	build.Dir = testenv.RepoRoot(t)
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build loadworker: %s", out)
	return bin
}

// startAgent starts an AgentWorkflow run of plan as the CLI does.
func (e *loadEnv) startAgent(ctx context.Context, id, queue string, plan spec.Plan) (tclient.WorkflowRun, error) {
	return startAgent(ctx, e.c, queue, id, plan)
}

type loadConfig struct {
	Agents, Steps, InFlight, Concurrency int
}

// loadConfigFromEnv is the AGENTFLOW_LOAD_* configuration (agents, steps,
// starts in flight, activity slots) with agents as the default number.
func loadConfigFromEnv(agents int) loadConfig {
	return loadConfig{
		Agents: envInt("AGENTFLOW_LOAD_AGENTS", agents), Steps: envInt("AGENTFLOW_LOAD_STEPS", 5),
		InFlight: envInt("AGENTFLOW_LOAD_INFLIGHT", 64), Concurrency: envInt("AGENTFLOW_LOAD_CONCURRENCY", 16),
	}
}

type loadResult struct {
	Name         string  `json:"name"`
	Agents       int     `json:"agents"`
	Steps        int     `json:"steps"`
	Completed    int     `json:"completed"`
	Failed       int     `json:"failed"`
	Lost         int     `json:"lost"`
	ClientErrors int     `json:"client_errors"`
	StartRetries int64   `json:"start_retries"`
	Duplicated   int     `json:"duplicated_tool_runs"`
	ToolRuns     int     `json:"tool_runs,omitempty"`
	WallSeconds  float64 `json:"wall_s"`
	P50          float64 `json:"p50_s"`
	P95          float64 `json:"p95_s"`
	P99          float64 `json:"p99_s"`
	WorkerCPU    float64 `json:"worker_cpu_s"`
	WorkerRSSMiB float64 `json:"worker_peak_rss_mib"`
	ServerCPU    float64 `json:"server_cpu_s"`
	// HistoryEvents counts the event types of one run's history ("total":
	// all events, "bytes": their encoded size): what the server writes per
	// run.
	HistoryEvents map[string]int `json:"history_events"`

	ids []string // the runs' workflow IDs
	// Requests counts the worker's calls to the server by operation
	// (engine only: the worker's own metrics).
	Requests map[string]float64 `json:"requests,omitempty"`
}

// temporalRequests reads the SDK's temporal_request counters by
// operation from the worker's /metrics.
func temporalRequests(url string) map[string]float64 {
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, m := range []string{"agentflow_step_duration_seconds_sum", "agentflow_step_duration_seconds_count",
			"temporal_activity_execution_latency_sum", "temporal_activity_execution_latency_count",
			"temporal_activity_schedule_to_start_latency_sum", "temporal_activity_schedule_to_start_latency_count",
			"temporal_workflow_task_execution_latency_sum", "temporal_workflow_task_execution_latency_count", "temporal_workflow_task_replay_latency_sum", "temporal_workflow_endtoend_latency_sum",
			"temporal_workflow_task_schedule_to_start_latency_sum", "temporal_workflow_task_schedule_to_start_latency_count", "temporal_sticky_cache_miss", "temporal_sticky_cache_hit",
			"agentflow_sandbox_phase_duration_seconds_sum"} {
			if strings.HasPrefix(line, m+"{") || strings.HasPrefix(line, m+" ") {
				v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				key := m
				if i := strings.Index(line, `phase="`); i >= 0 {
					key += ":" + line[i+7:i+7+strings.IndexByte(line[i+7:], '"')]
				}
				out[key] += v
			}
		}
		if !strings.HasPrefix(line, "temporal_request{") && !strings.HasPrefix(line, "temporal_request_total{") {
			continue
		}
		i := strings.Index(line, `operation="`)
		if i < 0 {
			continue
		}
		op := line[i+len(`operation="`):]
		op = op[:strings.IndexByte(op, '"')]
		v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		out[op] += v
	}
	return out
}

// historyShape counts the event types in one run's history.
func historyShape(ctx context.Context, c tclient.Client, id string) map[string]int {
	out := map[string]int{}
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return out
		}
		out[strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_")]++
		out["total"]++
		out["bytes"] += proto.Size(ev) // what the server stores and sends per run
	}
	return out
}

// loadPlan is a linear plan of k steps (each with retries) on a pinned
// image the no-op host never runs.
func loadPlan(t *testing.T, k, retries int) spec.Plan {
	t.Helper()
	var b strings.Builder
	b.WriteString("name: load\nversion: \"1.0.0\"\nsteps:\n")
	img := "sha256:" + strings.Repeat("0", 64)
	for i := range k {
		fmt.Fprintf(&b, "  - id: s%d\n    image: %q\n    inputs: {n: %d}\n    timeout: 60s\n    retries: %d\n", i, img, i, retries)
		if i > 0 {
			fmt.Fprintf(&b, "    depends_on: [s%d]\n", i-1)
		}
	}
	p, err := spec.Load("load.yaml", []byte(b.String()))
	require.NoError(t, err)
	return *p
}

// runLoadPhase runs one phase; inspect, when set, reads the closed runs
// while their worker still answers queries.
func runLoadPhase(t *testing.T, e *loadEnv, name string, args []string, cfg loadConfig,
	start func(ctx context.Context, id, queue string) (tclient.WorkflowRun, error), inspect func(ids []string)) loadResult {
	t.Helper()
	ctx := t.Context()
	c, srv, bin, tmp := e.c, e.srv, e.worker, e.tmp
	queue := fmt.Sprintf("load-%d", time.Now().UnixNano())
	dir := filepath.Join(tmp, queue)
	stats := filepath.Join(dir, "stats.json")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	wargs := append([]string{"-address", srv.Address, "-task-queue", queue,
		"-max-concurrent", strconv.Itoa(cfg.Concurrency), "-data-dir", dir, "-stats-file", stats}, args...)
	if pd := os.Getenv("AGENTFLOW_LOAD_PROFILE_DIR"); pd != "" {
		// A CPU profile of the worker per phase (what dominates it).
		wargs = append(wargs, "-cpuprofile", filepath.Join(pd, strings.ReplaceAll(name, " ", "_")+".cpu.pprof"))
	}
	cmd := exec.Command(bin, wargs...)
	var wlog bytes.Buffer
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &wlog
	require.NoError(t, cmd.Start())
	ready := make(chan struct{})
	var metricsURL string
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "loadworker metrics "); ok {
				metricsURL = u
			}
			if sc.Text() == "loadworker ready" {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: worker not ready: %s", name, wlog.String())
	}
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	serverCPU0 := procCPU(t, srv.Pid())
	stopPerf := perfServer(t, srv.Pid(), name)

	res := loadResult{Name: name, Agents: cfg.Agents, Steps: cfg.Steps}
	ids := make([]string, cfg.Agents)
	runs := make([]tclient.WorkflowRun, cfg.Agents)
	var retries atomic.Int64
	sem := make(chan struct{}, cfg.InFlight)
	var wg sync.WaitGroup
	var mu sync.Mutex
	t0 := time.Now()
	for i := range cfg.Agents {
		ids[i] = fmt.Sprintf("%s-%d", queue, i)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			run, err := startWithRetry(ctx, func(ctx context.Context) (tclient.WorkflowRun, error) { return start(ctx, ids[i], queue) }, &retries)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.ClientErrors++
				t.Logf("%s: start %s: %v", name, ids[i], err)
				return
			}
			runs[i] = run
		})
	}
	wg.Wait()
	res.StartRetries = retries.Load()

	// Every run must close within a bound generous for the machine.
	bound := time.Duration(cfg.Agents*cfg.Steps)*200*time.Millisecond + 5*time.Minute
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var done atomic.Int64
	for _, run := range runs {
		if run == nil {
			continue
		}
		wg.Go(func() {
			err := run.Get(wctx, nil)
			var canceled *temporal.CanceledError
			switch {
			case err == nil:
				done.Add(1)
			case wctx.Err() != nil && !errors.As(err, &canceled):
				mu.Lock()
				res.Lost++
				mu.Unlock()
			default:
				mu.Lock()
				res.Failed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.Completed = int(done.Load())
	res.WallSeconds = time.Since(t0).Seconds()
	stopPerf()

	// Latency of each run, by the server's clock: started → closed.
	var lat []float64
	lsem := make(chan struct{}, 16)
	for _, id := range ids {
		lsem <- struct{}{}
		wg.Go(func() {
			defer func() { <-lsem }()
			d, err := c.DescribeWorkflowExecution(ctx, id, "")
			if err != nil || d.WorkflowExecutionInfo.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				return
			}
			info := d.WorkflowExecutionInfo
			mu.Lock()
			lat = append(lat, info.GetCloseTime().AsTime().Sub(info.GetStartTime().AsTime()).Seconds())
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(lat)
	res.P50, res.P95, res.P99 = quantile(lat, 0.5), quantile(lat, 0.95), quantile(lat, 0.99)

	res.HistoryEvents = historyShape(ctx, c, ids[0])
	res.ids = ids
	if inspect != nil {
		inspect(ids)
	}
	if metricsURL != "" {
		res.Requests = temporalRequests(metricsURL)
	}

	res.WorkerCPU = procCPU(t, cmd.Process.Pid)
	res.WorkerRSSMiB = procPeakRSS(t, cmd.Process.Pid)
	res.ServerCPU = procCPU(t, srv.Pid()) - serverCPU0
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "%s worker: %s", name, wlog.String())
	if b, err := os.ReadFile(stats); err == nil {
		var st noophost.Stats
		require.NoError(t, json.Unmarshal(b, &st))
		res.Duplicated, res.ToolRuns = st.Duplicated, st.Execs
	}
	return res
}

// perfServer records the dev server's CPU profile with Linux perf while a
// phase runs, when AGENTFLOW_LOAD_PERF_DIR names a directory (the server
// is a binary we do not build, so pprof is not available): read it with
// `perf report -i DIR/PHASE.server.perf.data --no-children`. The returned
// func stops the recording.
func perfServer(t *testing.T, pid int, phase string) func() {
	t.Helper()
	dir := os.Getenv("AGENTFLOW_LOAD_PERF_DIR")
	if dir == "" {
		return func() {}
	}
	out := filepath.Join(dir, strings.NewReplacer(" ", "_", "+", "plus", ",", "").Replace(phase)+".server.perf.data")
	cmd := exec.Command("perf", "record", "-F", "499", "-g", "-p", strconv.Itoa(pid), "-o", out)
	var msg bytes.Buffer
	cmd.Stdout, cmd.Stderr = &msg, &msg
	require.NoError(t, cmd.Start(), "perf record (AGENTFLOW_LOAD_PERF_DIR)")
	return func() {
		_ = cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			t.Logf("perf record: %v: %s", err, msg.String())
		}
	}
}

// startWithRetry retries a start refused for load (ResourceExhausted,
// Unavailable, a deadline) with jittered backoff; an already-started
// workflow (a retried start that had in fact succeeded) counts as started.
func startWithRetry(ctx context.Context, start func(context.Context) (tclient.WorkflowRun, error), retries *atomic.Int64) (tclient.WorkflowRun, error) {
	backoff := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		run, err := start(sctx)
		cancel()
		if err == nil {
			return run, nil
		}
		var exists *serviceerror.WorkflowExecutionAlreadyStarted
		var exhausted *serviceerror.ResourceExhausted
		var unavailable *serviceerror.Unavailable
		var deadline *serviceerror.DeadlineExceeded
		switch {
		case errors.As(err, &exists):
			return nil, fmt.Errorf("started twice: %w", err)
		case errors.As(err, &exhausted), errors.As(err, &unavailable), errors.As(err, &deadline), errors.Is(err, context.DeadlineExceeded):
		default:
			return nil, err
		}
		if attempt >= 30 || ctx.Err() != nil {
			return nil, err
		}
		retries.Add(1)
		time.Sleep(backoff/2 + time.Duration(rand.Int64N(int64(backoff))))
		backoff = min(2*backoff, 5*time.Second)
	}
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func report(t *testing.T, cfg loadConfig, rs []loadResult) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nload: %d agents × %d steps, %d starts in flight, %d activity slots per worker\n", cfg.Agents, cfg.Steps, cfg.InFlight, cfg.Concurrency)
	fmt.Fprintf(&sb, "%-24s %6s %5s %5s %6s %8s %7s %7s %7s %8s %9s %8s %8s\n",
		"phase", "done", "lost", "fail", "c.err", "wall", "p50", "p95", "p99", "wkr cpu", "wkr rss", "srv cpu", "vs bare")
	base := rs[0].WallSeconds
	for _, r := range rs {
		fmt.Fprintf(&sb, "%-24s %6d %5d %5d %6d %7.1fs %6.1fs %6.1fs %6.1fs %7.1fs %7.0fMiB %7.1fs %8.2f\n",
			r.Name, r.Completed, r.Lost, r.Failed, r.ClientErrors, r.WallSeconds, r.P50, r.P95, r.P99,
			r.WorkerCPU, r.WorkerRSSMiB, r.ServerCPU, r.WallSeconds/base)
	}
	fmt.Print(sb.String())
	t.Log(sb.String())
	var lines []byte
	for _, r := range rs {
		b, _ := json.Marshal(map[string]any{"time": time.Now().UTC().Format(time.RFC3339), "config": cfg, "result": r})
		fmt.Println(string(b))
		lines = append(append(lines, b...), '\n')
	}
	if out := os.Getenv("AGENTFLOW_LOAD_OUT"); out != "" {
		f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		_, _ = f.Write(lines)
		f.Close()
	}
}

// TestLoadRecovery: ≥ 1,000 steps (200 agents × 5) with 5% of tool
// attempts failing at random (the no-op host's fail rate), once with
// `retries: 2` and once with `retries: 3`: the fraction of steps that
// recovered against the binomial expectation 1 − p^(retries+1), the failed
// attempts against their expectation Σ p^i, and whole runs against
// (1 − p^(retries+1))^K. The seed reports 99.2% of agents recovered within
// 3 retries under 5% random tool failure.
func TestLoadRecovery(t *testing.T) {
	if os.Getenv("AGENTFLOW_LOAD") != "1" {
		t.Skip("set AGENTFLOW_LOAD=1 to run the load harness")
	}
	const p = 0.05
	cfg := loadConfig{Agents: envInt("AGENTFLOW_RECOVERY_AGENTS", 200), Steps: 5, InFlight: 64, Concurrency: 16}
	env := startLoadEnv(t)
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nrecovery: %d agents × %d steps, %.0f%% of tool attempts fail at random\n", cfg.Agents, cfg.Steps, p*100)
	fmt.Fprintf(&sb, "%-10s %6s %9s %9s %12s %12s %9s %9s\n", "retries", "steps", "recovered", "expected", "failed att.", "expected", "runs ok", "expected")
	for _, retries := range []int{2, 3} {
		plan := loadPlan(t, cfg.Steps, retries)
		var steps, ok, failedAttempts, runsOK int
		r := runLoadPhase(t, env, fmt.Sprintf("5%% failures, retries %d", retries), []string{"-mode", "engine", "-fail-rate", fmt.Sprint(p)}, cfg,
			func(ctx context.Context, id, queue string) (tclient.WorkflowRun, error) {
				return env.startAgent(ctx, id, queue, plan)
			},
			func(ids []string) {
				for _, id := range ids {
					v, err := env.c.QueryWorkflow(t.Context(), id, "", workflows.StatusQuery)
					require.NoError(t, err)
					var st workflows.Status
					require.NoError(t, v.Get(&st))
					if st.Status == workflows.RunSucceeded {
						runsOK++
					}
					for _, rec := range st.StepHistory {
						switch rec.Status {
						case workflows.StepSuccess:
							steps++
							ok++
							failedAttempts += int(rec.Attempts) - 1
						case workflows.StepFailed:
							steps++
							failedAttempts += int(rec.Attempts)
						}
					}
				}
			})
		require.Zero(t, r.Lost)
		require.Zero(t, r.ClientErrors)
		require.Zero(t, r.Duplicated)
		q := math.Pow(p, float64(retries+1)) // a step fails every attempt
		var expFailed float64
		for i := 1; i <= retries+1; i++ {
			expFailed += math.Pow(p, float64(i))
		}
		fmt.Fprintf(&sb, "%-10d %6d %8.4f%% %8.4f%% %12d %12.1f %8.2f%% %8.2f%%\n", retries, steps,
			100*float64(ok)/float64(steps), 100*(1-q), failedAttempts, expFailed*float64(steps),
			100*float64(runsOK)/float64(len(r.ids)), 100*math.Pow(1-q, float64(cfg.Steps)))
		line, _ := json.Marshal(map[string]any{"time": time.Now().UTC().Format(time.RFC3339), "recovery": map[string]any{
			"retries": retries, "fail_rate": p, "steps": steps, "recovered": ok, "expected_recovered_fraction": 1 - q,
			"failed_attempts": failedAttempts, "expected_failed_attempts": expFailed * float64(steps),
			"runs": len(r.ids), "runs_succeeded": runsOK, "wall_s": r.WallSeconds}})
		fmt.Println(string(line))
		// Binomially, failed attempts ~ steps·Σp^i with sd ≈ sqrt(that):
		// a count far off means injection or retries are broken.
		require.InDelta(t, expFailed*float64(steps), float64(failedAttempts), 6*math.Sqrt(expFailed*float64(steps))+3)
	}
	fmt.Print(sb.String())
	t.Log(sb.String())
}

// TestReplayLongHistory: the state rebuild of a 127-step agent (the
// seed's 0.8 s): fetch its whole history from the server and replay it
// through AgentWorkflow, median of 5.
func TestReplayLongHistory(t *testing.T) {
	if os.Getenv("AGENTFLOW_LOAD") != "1" {
		t.Skip("set AGENTFLOW_LOAD=1 to run the load harness")
	}
	const k = 127
	env := startLoadEnv(t)
	plan := loadPlan(t, k, 0)
	r := runLoadPhase(t, env, "127 steps", []string{"-mode", "engine"}, loadConfig{Agents: 1, Steps: k, InFlight: 1, Concurrency: 4},
		func(ctx context.Context, id, queue string) (tclient.WorkflowRun, error) {
			return env.startAgent(ctx, id, queue, plan)
		}, nil)
	require.Equal(t, 1, r.Completed)
	id := r.ids[0]
	var fetches, replays []time.Duration
	var events int
	for range 5 {
		t0 := time.Now()
		h := &historypb.History{}
		it := env.c.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			h.Events = append(h.Events, ev)
		}
		fetches = append(fetches, time.Since(t0))
		events = len(h.Events)
		rp := sdkworker.NewWorkflowReplayer()
		rp.RegisterWorkflowWithOptions(workflows.AgentWorkflow, workflow.RegisterOptions{Name: workflows.WorkflowName})
		t1 := time.Now()
		require.NoError(t, rp.ReplayWorkflowHistory(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)), h))
		replays = append(replays, time.Since(t1))
	}
	f, rp := loadMedian(fetches), loadMedian(replays)
	line, _ := json.Marshal(map[string]any{"time": time.Now().UTC().Format(time.RFC3339), "replay": map[string]any{
		"steps": k, "events": events, "fetch_ms": f.Milliseconds(), "replay_ms": rp.Milliseconds(), "total_ms": (f + rp).Milliseconds()}})
	fmt.Println(string(line))
	t.Logf("127-step history: %d events; fetch %s + replay %s = %s (the seed: 0.8 s)", events, f.Round(time.Millisecond), rp.Round(time.Millisecond), (f + rp).Round(time.Millisecond))
}

func loadMedian(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestLoadBurst: 300 three-step agents submitted at once (every start in
// flight together) on the no-op host: how long a run takes from its start
// to its end when every other run of the burst competes with it. With a
// FIFO queue every run's second step waits behind every run's first step,
// so the median run finishes near the end of the burst.
func TestLoadBurst(t *testing.T) {
	if os.Getenv("AGENTFLOW_LOAD") != "1" {
		t.Skip("set AGENTFLOW_LOAD=1 to run the load harness")
	}
	n := envInt("AGENTFLOW_BURST_AGENTS", 300)
	cfg := loadConfig{Agents: n, Steps: 3, InFlight: n, Concurrency: 16}
	env := startLoadEnv(t)
	plan := loadPlan(t, cfg.Steps, 0)
	r := runLoadPhase(t, env, "burst", []string{"-mode", "engine"}, cfg,
		func(ctx context.Context, id, queue string) (tclient.WorkflowRun, error) {
			return env.startAgent(ctx, id, queue, plan)
		}, nil)
	require.Zero(t, r.Lost)
	require.Zero(t, r.ClientErrors)
	line, _ := json.Marshal(map[string]any{"time": time.Now().UTC().Format(time.RFC3339), "burst": map[string]any{
		"agents": n, "steps": cfg.Steps, "wall_s": r.WallSeconds, "p50_s": r.P50, "p95_s": r.P95, "p99_s": r.P99}})
	fmt.Println(string(line))
	t.Logf("burst of %d × %d: wall %.1fs, run latency p50 %.1fs p95 %.1fs p99 %.1fs", n, cfg.Steps, r.WallSeconds, r.P50, r.P95, r.P99)
}
