//go:build e2e

package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/workflows"
)

// chainLen is the length of the chain of issue 9's "Done when".
const chainLen = 12

// chainStep writes its own file of the chain and reads every earlier one
// (strict: a missing one fails the step), so step n passes only when the
// workspace restored from step n-1's checkpoint holds the whole chain so
// far. (One file per step rather than appending to one file: wsfile writes
// before it reads, and a step's read must see the restored workspace, not
// its own write.)
func (e *chaosEnv) chainStep(n int) spec.PlanStep {
	var read []any
	for k := 1; k < n; k++ {
		read = append(read, chainFile(k))
	}
	s := e.step(chainID(n), "wsfile", map[string]any{
		"write":  map[string]any{chainFile(n): chainLine(n)},
		"read":   read,
		"strict": true,
	})
	if n > 1 {
		s.DependsOn = []string{chainID(n - 1)}
		s.ExplicitDependsOn = s.DependsOn
	}
	return s
}

func chainID(n int) string   { return fmt.Sprintf("s%02d", n) }
func chainFile(n int) string { return fmt.Sprintf("chain/%02d.txt", n) }
func chainLine(n int) string { return fmt.Sprintf("line %02d\n", n) }

// requireFullChain checks the output of the step that wrote file upto: it
// read every earlier file with its content and its workspace holds all.
func requireFullChain(t *testing.T, r workflows.StepRecord, upto int) {
	t.Helper()
	require.Equal(t, workflows.StepSuccess, r.Status, "%s: %s", r.ID, r.Error)
	files, _ := r.Output["files"].(map[string]any)
	var ws []string
	for _, f := range r.Output["workspace_files"].([]any) {
		ws = append(ws, f.(string))
	}
	for k := 1; k <= upto; k++ {
		if k < upto {
			require.Equal(t, chainLine(k), files[chainFile(k)], "%s read %s", r.ID, chainFile(k))
		}
		require.Contains(t, ws, chainFile(k), "%s's workspace", r.ID)
	}
}

// countRuns counts the successful attempts of agent/step in a worker's log.
func (w *chaosWorker) countRuns(agentID, step string) int {
	n := 0
	for _, line := range strings.Split(w.log(), "\n") {
		if strings.Contains(line, `msg="step attempt succeeded"`) &&
			strings.Contains(line, "agent_id="+agentID+" ") && strings.Contains(line, "step_id="+step+" ") {
			n++
		}
	}
	return n
}

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestChaosChainAcrossWorkers is issue 9's "Done when" with two workers:
// a 12-step chain runs across both, resume --from-step restores a
// checkpoint the other worker wrote, and `logs -f` in a third process
// shows a running step's lines.
//
// Runs with the S3 store and separate data directories per worker
// (default) and with one shared directory (AGENTFLOW_CHAOS_STORE=shared-dir); the
// `logs -f` part relies on live chunked logs and `agentctl logs --store`
// (internal/logstore).
func TestChaosChainAcrossWorkers(t *testing.T) {
	e := newChaos(t, "chain", "")
	e.startWorker(t, "a")
	e.startWorker(t, "b")
	id := e.queue + "-chain"
	var steps []spec.PlanStep
	for n := 1; n <= chainLen; n++ {
		steps = append(steps, e.chainStep(n))
	}
	run := e.submit(t, id, steps...)

	// One worker takes the run (its workflow task is sticky and activities
	// start eagerly on it). Stop it gracefully a third of the way in and
	// start it again: the chain must go on on the other worker, restoring
	// the stopped worker's checkpoints.
	var first *chaosWorker
	require.Eventually(t, func() bool {
		for _, n := range []string{"a", "b"} {
			if e.worker(t, n).ranStep(id, chainID(4)) {
				first = e.worker(t, n)
				return true
			}
		}
		return false
	}, chaosBound, 250*time.Millisecond, "step %s never succeeded", chainID(4))
	first.signal(t, syscall.SIGTERM)
	require.NoError(t, first.waitExit(t, 2*time.Minute))
	e.startWorker(t, first.name)

	st := e.waitRun(t, run)
	require.Equal(t, workflows.RunSucceeded, st.Status)
	for n := 1; n <= chainLen; n++ {
		requireFullChain(t, stepRecord(t, st, chainID(n)), n)
	}
	ran := map[string][]string{}
	for n := 1; n <= chainLen; n++ {
		for _, w := range []string{"a", "b"} {
			if e.worker(t, w).ranStep(id, chainID(n)) {
				ran[w] = append(ran[w], chainID(n))
			}
		}
	}
	t.Logf("steps per worker: %v", ran)
	require.NotEmpty(t, ran["a"], "worker a ran no step")
	require.NotEmpty(t, ran["b"], "worker b ran no step")

	// resume --from-step from the other worker's side: stop the worker
	// that wrote the last step's input checkpoint, so the re-run step can
	// only run on the other one and must restore what the stopped one
	// wrote.
	last := chainID(chainLen)
	var writer *chaosWorker
	for _, w := range []string{"a", "b"} {
		if e.worker(t, w).ranStep(id, chainID(chainLen-1)) {
			writer = e.worker(t, w)
		}
	}
	require.NotNil(t, writer)
	reader := e.worker(t, other(writer.name))
	writer.signal(t, syscall.SIGTERM)
	require.NoError(t, writer.waitExit(t, 2*time.Minute))
	before := reader.countRuns(id, last)
	var out, errOut bytes.Buffer
	resume := exec.Command(e.bin, "--address", e.address, "resume", id, "--from-step", last, "--task-queue", e.queue, "--wait", "-o", "json")
	resume.Stdout, resume.Stderr = &out, &errOut
	require.NoError(t, resume.Run(), "resume: %s", errOut.String())
	var st2 workflows.Status
	require.NoError(t, json.Unmarshal(out.Bytes(), &st2), "resume output: %s", out.String())
	require.Equal(t, workflows.RunSucceeded, st2.Status)
	require.NotEqual(t, st.RunID, st2.RunID)
	require.True(t, stepRecord(t, st2, chainID(chainLen-1)).Carried)
	requireFullChain(t, stepRecord(t, st2, last), chainLen)
	require.Equal(t, before+1, reader.countRuns(id, last), "the resumed step did not run on worker %s", reader.name)
	e.startWorker(t, writer.name)

	// logs -f from a third process shows a running step's lines before it
	// ends. The tool prints its line and then waits for SIGTERM (up to
	// 240 s), so the step is still running whenever the line shows, unless
	// the line only arrives with the end of the attempt.
	logsID := e.queue + "-logs"
	waitStep := e.step("wait", "testtool", map[string]any{"mode": "sigterm", "seconds": 240})
	waitStep.Timeout = 5 * time.Minute
	logsRun := e.submit(t, logsID, waitStep)
	e.waitToolRunning(t, logsID, "wait")
	logsArgs, logsEnv := e.logsArgs(t)
	var follow syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), chaosBound)
	defer cancel()
	logs := exec.CommandContext(ctx, e.bin, append([]string{"--address", e.address, "logs", logsID, "--step", "wait", "-f"}, logsArgs...)...)
	logs.Env = append(os.Environ(), logsEnv...)
	logs.Stdout, logs.Stderr = &follow, &follow
	require.NoError(t, logs.Start())
	logsDone := make(chan error, 1)
	exited := make(chan struct{})
	go func() { logsDone <- logs.Wait(); close(exited) }()
	const marker = "testtool: waiting for SIGTERM"
	require.Eventually(t, func() bool {
		select {
		case <-exited: // it will not show anything any more
			return true
		default:
			return strings.Contains(follow.String(), marker)
		}
	}, chaosBound, 250*time.Millisecond, "logs -f never showed the tool's line:\n%s", follow.String())
	require.Contains(t, follow.String(), marker, "logs -f ended without the tool's line")
	// Needs live chunked logs (slice logs).
	require.Equal(t, workflows.StepRunning, stepRecord(t, e.status(t, logsID), "wait").Status,
		"the line showed only once the step had ended")
	require.NoError(t, e.client.CancelWorkflow(t.Context(), logsID, ""))
	st3 := e.waitRun(t, logsRun)
	require.Equal(t, workflows.RunCanceled, st3.Status)
	select {
	case err := <-logsDone:
		require.NoError(t, err, "logs -f: %s", follow.String())
	case <-ctx.Done():
		t.Fatalf("logs -f did not end with the run:\n%s", follow.String())
	}

	for _, agent := range []string{id, logsID} {
		e.requireNoSandboxes(t, agent, time.Minute)
	}
}
