//go:build e2e

package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/devserver"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/internal/testenv"
	"github.com/agentflow/agentflow/workflows"
)

// The chaos harness runs issue 9's fault cases end to end: a real Temporal
// dev server, real `agentctl worker` processes (two per test, on one task
// queue of the test's own, so one test's steps never reach another test's
// workers), the real Docker daemon, and faults injected from outside the
// way an operator or a crash would: signals to the worker process, docker
// kill/rm of the sandbox, the Temporal server going away.
//
// Every sandbox a chaos worker creates carries agentflow.e2e=<test label>
// and agentflow.chaos.worker=<worker name>, so a test can tell which
// worker runs a step and can clean up after itself without touching
// anything else on the shared daemon.

// chaosStoreKind is where the workers of a chaos test keep checkpoints and
// logs.
type chaosStoreKind string

const (
	// chaosSharedDir: both workers share one local checkpoint directory and
	// one log directory (and so one signing key), as on one machine. It
	// proves the engine side (retries, adoption, hand-back), not the store.
	chaosSharedDir chaosStoreKind = "shared-dir"
	// chaosMinIO: each worker has its own data directories (as if on two
	// machines) and both use --store s3://… on a MinIO server of the test,
	// with one shared --checkpoint-key-file.
	chaosMinIO chaosStoreKind = "minio"
)

// chaosStoreDefault is the one switch between the two: the S3 store, as
// issue 9 asks (workers as if on two machines); AGENTFLOW_CHAOS_STORE
// (shared-dir|minio) overrides it for a run.
const chaosStoreDefault = chaosMinIO

func chaosStore(t *testing.T) chaosStoreKind {
	t.Helper()
	switch k := chaosStoreKind(os.Getenv("AGENTFLOW_CHAOS_STORE")); k {
	case "":
		return chaosStoreDefault
	case chaosSharedDir, chaosMinIO:
		return k
	default:
		t.Fatalf("AGENTFLOW_CHAOS_STORE=%q: want %s or %s", k, chaosSharedDir, chaosMinIO)
		return ""
	}
}

// chaosBound is how long the harness waits for anything (a run to end, a
// tool to start, a sandbox to go): generous, the machine is shared and
// loaded. It bounds waits; nothing asserts how fast something happened.
const chaosBound = 6 * time.Minute

// shared is what chaos tests share across test functions: one dev server
// (tests that do not stop Temporal) and one agentctl build. TestMain ends
// both.
var shared struct {
	mu       sync.Mutex
	dir      string
	srv      *devserver.Server
	agentctl string
}

func sharedDir(t *testing.T) string {
	t.Helper()
	if shared.dir == "" {
		d, err := os.MkdirTemp("", "agentflow-chaos-")
		require.NoError(t, err)
		shared.dir = d
	}
	return shared.dir
}

// sharedTemporal returns the frontend address of the shared dev server,
// starting it on first use.
func sharedTemporal(t *testing.T) string {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		select {
		case <-shared.srv.Done():
			t.Fatalf("the shared dev server exited: %v", shared.srv.Err())
		default:
			return shared.srv.Address
		}
	}
	dir := sharedDir(t)
	logf, err := os.Create(filepath.Join(dir, "temporal.log"))
	require.NoError(t, err)
	srv, err := devserver.Start(context.Background(), devserver.Options{
		Bin: testenv.TemporalBinary(t), Port: testenv.FreePort(t), Headless: true,
		DBFile: filepath.Join(dir, "temporal.db"), Stdout: logf, Stderr: logf,
	})
	require.NoError(t, err, "start the shared dev server")
	shared.srv = srv
	return srv.Address
}

// sharedAgentctl builds the full agentctl once per test binary.
func sharedAgentctl(t *testing.T) string {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.agentctl != "" {
		return shared.agentctl
	}
	bin := filepath.Join(sharedDir(t), "agentctl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/agentctl")
	build.Dir = repoRoot(t)
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build agentctl: %s", out)
	shared.agentctl = bin
	return bin
}

// chaosTeardown stops the shared dev server and removes the shared files.
func chaosTeardown() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		_ = shared.srv.Stop(15 * time.Second)
		shared.srv = nil
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
		shared.dir = ""
	}
}

// restartableTemporal is a dev server of one test that the test may stop
// and start again on the same port with the same SQLite file: a Temporal
// outage that loses nothing.
type restartableTemporal struct {
	t    *testing.T
	opts devserver.Options
	srv  *devserver.Server
}

func startRestartableTemporal(t *testing.T, dir string) *restartableTemporal {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, "temporal.log"))
	require.NoError(t, err)
	t.Cleanup(func() { logf.Close() })
	r := &restartableTemporal{t: t, opts: devserver.Options{
		Bin: testenv.TemporalBinary(t), Port: testenv.FreePort(t), Headless: true,
		DBFile: filepath.Join(dir, "temporal.db"), Stdout: logf, Stderr: logf,
	}}
	r.Start()
	t.Cleanup(func() {
		if r.srv != nil {
			_ = r.srv.Stop(15 * time.Second)
		}
	})
	return r
}

func (r *restartableTemporal) Address() string {
	return fmt.Sprintf("127.0.0.1:%d", r.opts.Port)
}

// Stop shuts the server down (SIGTERM, then kill after a grace).
func (r *restartableTemporal) Stop() {
	r.t.Helper()
	require.NotNil(r.t, r.srv, "dev server not running")
	_ = r.srv.Stop(15 * time.Second)
	r.srv = nil
}

// Start starts it (again) on the same port and database file.
func (r *restartableTemporal) Start() {
	r.t.Helper()
	require.Nil(r.t, r.srv, "dev server already running")
	// The port was just released by the stopped server: retry a bind
	// conflict briefly (a lingering listener of the old process).
	var err error
	require.Eventually(r.t, func() bool {
		r.srv, err = devserver.Start(context.Background(), r.opts)
		return err == nil
	}, 2*time.Minute, time.Second, "start dev server on port %d", r.opts.Port)
}

// chaosEnv is one chaos test: its task queue, sandbox label, workers and
// store. It embeds engineEnv for plan building, submission, status and
// history helpers.
type chaosEnv struct {
	*engineEnv
	queue   string
	bin     string
	store   chaosStoreKind
	keyFile string
	// minio is the test's S3 server (store chaosMinIO only); every worker
	// of the test uses the bucket under the prefix runLabel.
	minio *testenv.MinIOServer

	mu      sync.Mutex
	workers []*chaosWorker
}

// newChaos prepares a chaos test against the Temporal at address ("" = the
// shared dev server), on the store chaosStore selects. Workers are started
// with startWorker.
func newChaos(t *testing.T, name, address string) *chaosEnv {
	t.Helper()
	return newChaosStore(t, name, address, chaosStore(t))
}

// newChaosStore is newChaos on a given store (a test about the S3 store
// itself needs MinIO whatever the default).
func newChaosStore(t *testing.T, name, address string, store chaosStoreKind) *chaosEnv {
	t.Helper()
	root := repoRoot(t)
	dc := testenv.Docker(t)
	images := loadImages(t, root, "testtool", "wsfile")
	if address == "" {
		address = sharedTemporal(t)
	}
	bin := sharedAgentctl(t)
	tmp := t.TempDir()
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000_000_000)
	e := &chaosEnv{
		engineEnv: &engineEnv{
			docker:   dc,
			images:   images,
			logDir:   filepath.Join(tmp, "logs"),
			runLabel: "chaos-" + name + "-" + suffix,
			address:  address,
			tmp:      tmp,
		},
		queue: "chaos-" + name + "-" + suffix,
		bin:   bin,
		store: store,
	}
	if store == chaosMinIO {
		e.minio = testenv.MinIO(t)
	}
	// Registered first, so it runs last: whatever a failed test left (a
	// killed worker's sandbox, say) is removed. Only this test's sandboxes
	// carry its label. Assertions about leftovers happen before, in the
	// test body.
	t.Cleanup(func() { e.removeSandboxes(t) })

	// One signing key for every worker of the test: each must verify the
	// others' checkpoint manifests (a shared store requires it).
	secret := make([]byte, 32)
	_, err := rand.Read(secret)
	require.NoError(t, err)
	e.keyFile = filepath.Join(tmp, "checkpoint.keys")
	require.NoError(t, os.WriteFile(e.keyFile, []byte("chaos-1 "+base64.StdEncoding.EncodeToString(secret)+"\n"), 0o600))

	c, err := client.Dial(client.Options{HostPort: address, Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	e.client = c
	return e
}

// storeArgs are the worker flags (and environment) that place a worker's
// checkpoints, logs and results.
func (e *chaosEnv) storeArgs(t *testing.T, name string) ([]string, []string) {
	t.Helper()
	switch e.store {
	case chaosSharedDir:
		return []string{
			"--checkpoint-dir", filepath.Join(e.tmp, "checkpoints"),
			"--log-dir", e.logDir,
		}, nil
	case chaosMinIO:
		// Each worker its own local directories, as if on its own
		// machine: whatever two workers share goes through the bucket.
		dir := filepath.Join(e.tmp, "worker-"+name)
		return []string{
			"--store", e.minio.StoreURL(e.runLabel),
			"--checkpoint-dir", filepath.Join(dir, "checkpoints"),
			"--log-dir", filepath.Join(dir, "logs"),
		}, e.minio.Env()
	default:
		t.Fatalf("unknown chaos store %s", e.store)
		return nil, nil
	}
}

// logsArgs are the flags `agentctl logs` needs to read this test's logs.
func (e *chaosEnv) logsArgs(t *testing.T) ([]string, []string) {
	t.Helper()
	switch e.store {
	case chaosSharedDir:
		return []string{"--log-dir", e.logDir}, nil
	case chaosMinIO:
		return []string{"--store", e.minio.StoreURL(e.runLabel)}, e.minio.Env()
	default:
		t.Fatalf("unknown chaos store %s", e.store)
		return nil, nil
	}
}

// chaosWorker is one `agentctl worker` process.
type chaosWorker struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // of Wait, once done is closed
}

// startWorker starts a worker process on the test's queue and waits until
// it polls. extra flags are appended (later flags win).
func (e *chaosEnv) startWorker(t *testing.T, name string, extra ...string) *chaosWorker {
	t.Helper()
	storeArgs, env := e.storeArgs(t, name)
	args := append([]string{"--address", e.address, "worker",
		"--task-queue", e.queue,
		"--health-addr", "-", "--metrics-addr", "-",
		"--checkpoint-key-file", e.keyFile,
		// The start-up sandbox checks are not what these tests are
		// about, and they cost minutes on a loaded machine per start.
		"--preflight", "off",
		"--sandbox-label", "agentflow.test=1",
		"--sandbox-label", "agentflow.e2e=" + e.runLabel,
		"--sandbox-label", "agentflow.chaos.worker=" + name,
	}, storeArgs...)
	args = append(args, extra...)
	w := &chaosWorker{name: name, logPath: filepath.Join(e.tmp, "worker-"+name+".log"), done: make(chan struct{})}
	// A restarted worker of the same name appends to the same log: it is
	// up once the log holds one more start line than before.
	const started = `msg="worker started"`
	before := strings.Count(w.log(), started)
	logf, err := os.OpenFile(w.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	w.cmd = exec.Command(e.bin, args...)
	w.cmd.Env = append(os.Environ(), env...)
	w.cmd.Stdout, w.cmd.Stderr = logf, logf
	require.NoError(t, w.cmd.Start())
	go func() {
		w.err = w.cmd.Wait()
		logf.Close()
		close(w.done)
	}()
	e.mu.Lock()
	e.workers = append(e.workers, w)
	e.mu.Unlock()
	t.Cleanup(func() {
		w.stop()
		if t.Failed() {
			t.Logf("worker %s log:\n%s", name, w.log())
		}
	})
	require.Eventually(t, func() bool {
		select {
		case <-w.done:
			return true
		default:
		}
		return strings.Count(w.log(), started) > before
	}, 3*time.Minute, 200*time.Millisecond, "worker %s did not start", name)
	require.False(t, w.exited(), "worker %s exited during start: %v\n%s", name, w.err, w.log())
	return w
}

// stop ends the process if it still runs: SIGCONT (it may be stopped),
// SIGTERM, SIGKILL after a grace.
func (w *chaosWorker) stop() {
	if w.exited() {
		return
	}
	_ = w.cmd.Process.Signal(syscall.SIGCONT)
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(90 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.done
	}
}

func (w *chaosWorker) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, w.cmd.Process.Signal(sig), "signal %v to worker %s", sig, w.name)
}

func (w *chaosWorker) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// waitExit waits for the process to end within bound and returns its
// Wait error.
func (w *chaosWorker) waitExit(t *testing.T, bound time.Duration) error {
	t.Helper()
	select {
	case <-w.done:
		return w.err
	case <-time.After(bound):
		t.Fatalf("worker %s still running %s after the signal", w.name, bound)
		return nil
	}
}

func (w *chaosWorker) log() string {
	b, _ := os.ReadFile(w.logPath)
	return string(b)
}

// ranStep reports whether the worker's log says it finished an attempt of
// agent/step successfully (the line RunStep logs once per attempt).
func (w *chaosWorker) ranStep(agentID, step string) bool {
	for _, line := range strings.Split(w.log(), "\n") {
		if strings.Contains(line, `msg="step attempt succeeded"`) &&
			strings.Contains(line, "agent_id="+agentID+" ") && strings.Contains(line, "step_id="+step+" ") {
			return true
		}
	}
	return false
}

func (e *chaosEnv) worker(t *testing.T, name string) *chaosWorker {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.workers) - 1; i >= 0; i-- {
		if e.workers[i].name == name {
			return e.workers[i]
		}
	}
	t.Fatalf("no worker %s", name)
	return nil
}

// running is a sandbox with the tool running in it.
type running struct {
	containerID string
	worker      string // agentflow.chaos.worker label
	attempt     string
}

// waitToolRunning waits until /bin/tool runs in a sandbox of agent/step
// (not mid-provision: the process shows in the container's process list)
// and says which worker owns it.
func (e *chaosEnv) waitToolRunning(t *testing.T, agentID, step string) running {
	t.Helper()
	var r running
	require.Eventually(t, func() bool {
		for _, c := range e.containers(t, agentID) {
			if c.State != "running" || c.Labels[activities.LabelStepID] != step {
				continue
			}
			top, err := e.docker.ContainerTop(context.Background(), c.ID, nil)
			if err != nil {
				continue
			}
			for _, p := range top.Processes {
				if strings.Contains(strings.Join(p, " "), "/bin/tool") {
					r = running{containerID: c.ID, worker: c.Labels["agentflow.chaos.worker"], attempt: c.Labels[activities.LabelAttempt]}
					return true
				}
			}
		}
		return false
	}, chaosBound, 250*time.Millisecond, "the tool of %s/%s never ran", agentID, step)
	return r
}

// workerContainers lists the sandboxes one worker of this test owns.
func (e *chaosEnv) workerContainers(t *testing.T, name string) []container.Summary {
	t.Helper()
	f := filters.NewArgs(filters.Arg("label", "agentflow.e2e="+e.runLabel), filters.Arg("label", "agentflow.chaos.worker="+name))
	list, err := e.docker.ContainerList(context.Background(), container.ListOptions{All: true, Filters: f})
	require.NoError(t, err)
	return list
}

// requireNoSandboxes waits (within bound) until no sandbox of agentID is
// left; a worker's reaper removes a dead owner's sandboxes once a minute,
// so callers that rely on it pass a bound over a minute.
func (e *chaosEnv) requireNoSandboxes(t *testing.T, agentID string, bound time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return len(e.containers(t, agentID)) == 0 }, bound, 500*time.Millisecond,
		"sandboxes left behind for %s: %v", agentID, e.containers(t, agentID))
}

// removeSandboxes force-removes every sandbox of this test (cleanup).
func (e *chaosEnv) removeSandboxes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", "agentflow.e2e="+e.runLabel))
	list, err := e.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Logf("cleanup: list sandboxes: %v", err)
		return
	}
	for _, c := range list {
		t.Logf("cleanup: removing sandbox %s (%s) left by the test", c.ID[:12], c.State)
		_ = e.docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	}
}

// submit starts a run on the test's queue.
func (e *chaosEnv) submit(t *testing.T, id string, steps ...spec.PlanStep) client.WorkflowRun {
	t.Helper()
	return e.startOn(t, e.queue, id, plan("chaos", steps...), nil)
}

// waitRun waits for a run to close (within chaosBound) and returns the
// status document of the run, whatever its outcome.
func (e *chaosEnv) waitRun(t *testing.T, run client.WorkflowRun) workflows.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), chaosBound)
	defer cancel()
	var err error
	for {
		var res workflows.Result
		err = run.Get(ctx, &res)
		require.NoError(t, ctx.Err(), "run %s did not end within %s", run.GetID(), chaosBound)
		// Get also returns when its connection broke (the server was
		// restarted under it): only a closed run is an answer.
		d, derr := e.client.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
		if derr == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			break
		}
		t.Logf("run %s: Get returned (%v) but the run is not closed (describe: %v); waiting on", run.GetID(), err, derr)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	// The status query needs a worker to replay the closed run; right after
	// a Temporal restart the workers may still be reconnecting.
	var st workflows.Status
	require.Eventually(t, func() bool {
		v, qerr := e.client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), workflows.StatusQuery)
		if qerr != nil {
			t.Logf("status query of %s: %v (retrying)", run.GetID(), qerr)
			return false
		}
		return v.Get(&st) == nil
	}, 2*time.Minute, time.Second, "no status of run %s", run.GetID())
	t.Logf("run %s ended %s (err %v)", run.GetID(), st.Status, err)
	for _, r := range st.StepHistory {
		t.Logf("  step %s: %s, %d attempts, error %q", r.ID, r.Status, r.Attempts, r.Error)
	}
	return st
}

// attemptEvent is how one RunStep of a step ended in the run's history.
type attemptEvent struct {
	Outcome string // completed | failed | timed_out
	Type    string // failure type (ApplicationError type, or the timeout type)
	Message string
	Details string // the failure's details payloads, as text
}

// stepAttempts reads the run's history: the end of every RunStep activity
// of step, in order. With the workflow running each attempt as its own
// activity every attempt shows; with a server-side retry policy only the
// last one does.
func (e *chaosEnv) stepAttempts(t *testing.T, id, runID, step string) []attemptEvent {
	t.Helper()
	out := e.stepAttemptsQuiet(t, id, runID, step)
	t.Logf("history of %s: RunStep of %s ended %+v", id, step, out)
	return out
}

// stepAttemptsQuiet is stepAttempts without the log line, for polling.
func (e *chaosEnv) stepAttemptsQuiet(t *testing.T, id, runID, step string) []attemptEvent {
	t.Helper()
	it := e.client.GetWorkflowHistory(t.Context(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ours := map[int64]bool{}
	needle := []byte(`"step_id":"` + step + `"`)
	var out []attemptEvent
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := ev.GetActivityTaskScheduledEventAttributes()
			if a.GetActivityType().GetName() != "RunStep" {
				continue
			}
			for _, p := range a.GetInput().GetPayloads() {
				if bytes.Contains(p.GetData(), needle) {
					ours[ev.GetEventId()] = true
				}
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if ours[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] {
				out = append(out, attemptEvent{Outcome: "completed"})
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			a := ev.GetActivityTaskFailedEventAttributes()
			if ours[a.GetScheduledEventId()] {
				f := a.GetFailure()
				var details strings.Builder
				for _, p := range f.GetApplicationFailureInfo().GetDetails().GetPayloads() {
					details.Write(p.GetData())
				}
				out = append(out, attemptEvent{Outcome: "failed", Type: f.GetApplicationFailureInfo().GetType(), Message: f.GetMessage(), Details: details.String()})
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			a := ev.GetActivityTaskTimedOutEventAttributes()
			if ours[a.GetScheduledEventId()] {
				f := a.GetFailure()
				out = append(out, attemptEvent{Outcome: "timed_out", Type: f.GetTimeoutFailureInfo().GetTimeoutType().String(), Message: f.GetMessage()})
			}
		}
	}
	return out
}

// toolRuns counts executions of /bin/tool per agent/step as the Docker
// daemon reports them (exec_start events of this test's sandboxes). The
// daemon is the witness: a tool that runs twice shows twice whatever the
// engine believes, and nothing the workers log or store is involved.
type toolRuns struct {
	mu     sync.Mutex
	counts map[string]int // "agent/step" → tool execs
}

func (e *chaosEnv) watchToolRuns(t *testing.T) *toolRuns {
	t.Helper()
	r := &toolRuns{counts: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	msgs, errs := e.docker.Events(ctx, events.ListOptions{Filters: filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("label", "agentflow.e2e="+e.runLabel),
	)})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case m := <-msgs:
				action := string(m.Action)
				if strings.HasPrefix(action, "exec_start") && strings.Contains(action, activities.ToolCommand[0]) {
					key := m.Actor.Attributes[activities.LabelAgentID] + "/" + m.Actor.Attributes[activities.LabelStepID]
					r.mu.Lock()
					r.counts[key]++
					r.mu.Unlock()
				}
			case err := <-errs:
				if ctx.Err() == nil && err != nil && err != io.EOF {
					t.Errorf("docker events: %v", err)
				}
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return r
}

func (r *toolRuns) count(agentID, step string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[agentID+"/"+step]
}

func (r *toolRuns) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.counts {
		n += c
	}
	return n
}

func (r *toolRuns) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprint(r.counts)
}
