// Command record runs representative AgentWorkflow executions against a
// real Temporal server, with fake activities, and writes each history as
// JSON into workflows/testdata/histories for the replay test. See
// workflows/testdata/README.md for how to run it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/internal/spec"
	wf "github.com/agentflow/agentflow/workflows"
)

const taskQueue = "agentflow-record"

func main() {
	addr := flag.String("address", "127.0.0.1:7433", "Temporal frontend address")
	out := flag.String("out", "workflows/testdata/histories", "directory for the history JSON files")
	only := flag.String("only", "", "record only this scenario")
	overwrite := flag.Bool("overwrite", false, "replace histories that exist (they pin older workflow versions)")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := run(*addr, *out, *only, *overwrite, logger); err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(1)
	}
}

func run(addr, out, only string, overwrite bool, logger *slog.Logger) error {
	c, err := client.Dial(client.Options{HostPort: addr, Logger: tlog.NewStructuredLogger(logger)})
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	defer c.Close()
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(wf.AgentWorkflow, workflow.RegisterOptions{Name: wf.WorkflowName})
	fake := &fakeActivities{}
	w.RegisterActivityWithOptions(fake.RunStep, activity.RegisterOptions{Name: "RunStep"})
	w.RegisterActivityWithOptions(fake.RunFinished, activity.RegisterOptions{Name: "RunFinished"})
	w.RegisterActivityWithOptions(fake.RunEnded, activity.RegisterOptions{Name: "RunEnded"})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, sc := range scenarios() {
		if only != "" && sc.name != only {
			continue
		}
		path := filepath.Join(out, sc.name+".json")
		// A recorded history pins the workflow version it ran on; today's
		// code records today's version, so re-recording an old file would
		// silently drop the pin of an older branch.
		if _, err := os.Stat(path); err == nil && !overwrite {
			fmt.Printf("kept     %-22s (exists; it pins the version it was recorded with; -overwrite to replace)\n", sc.name)
			continue
		}
		id := "record-" + sc.name
		opts := client.StartWorkflowOptions{
			ID: id, TaskQueue: taskQueue,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			// The terminate-if-running conflict policy lets a re-record
			// replace a run left over from an interrupted recording.
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING,
		}
		if sc.asClient {
			// What agentctl run sets at start.
			opts.TypedSearchAttributes = temporal.NewSearchAttributes(
				temporal.NewSearchAttributeKeyKeyword(wf.SearchAttrAgentName).ValueSet(id),
				temporal.NewSearchAttributeKeyKeyword(wf.SearchAttrSpec).ValueSet(sc.in.Plan.Name),
				temporal.NewSearchAttributeKeyKeyword(wf.SearchAttrStatus).ValueSet(wf.RunPending),
			)
			opts.Memo = map[string]any{wf.MemoSpecName: sc.in.Plan.Name, wf.MemoSpecVersion: sc.in.Plan.Version}
		}
		run, err := c.ExecuteWorkflow(ctx, opts, wf.WorkflowName, sc.in)
		if err != nil {
			return fmt.Errorf("%s: start: %w", sc.name, err)
		}
		if sc.drive != nil {
			if err := sc.drive(ctx, c, run); err != nil {
				return fmt.Errorf("%s: drive: %w", sc.name, err)
			}
		}
		var res wf.Result
		runErr := run.Get(ctx, &res)
		st, err := queryStatus(ctx, c, run)
		if err != nil {
			return fmt.Errorf("%s: query: %w", sc.name, err)
		}
		if st.Status != sc.want {
			return fmt.Errorf("%s: run ended %s (%v), want %s", sc.name, st.Status, runErr, sc.want)
		}
		if sc.check != nil {
			if err := sc.check(st); err != nil {
				return fmt.Errorf("%s: %w", sc.name, err)
			}
		}
		if err := dumpHistory(ctx, c, run, path); err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		fmt.Printf("recorded %-22s %-9s -> %s\n", sc.name, st.Status, path)
	}
	return nil
}

func queryStatus(ctx context.Context, c client.Client, run client.WorkflowRun) (*wf.Status, error) {
	v, err := c.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), wf.StatusQuery)
	if err != nil {
		return nil, err
	}
	var st wf.Status
	return &st, v.Get(&st)
}

// waitFor polls the status query until cond holds (recording only; tests
// never poll).
func waitFor(ctx context.Context, c client.Client, run client.WorkflowRun, cond func(*wf.Status) bool) error {
	for {
		st, err := queryStatus(ctx, c, run)
		if err == nil && cond(st) {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func stepStatus(st *wf.Status, id string) string {
	for _, r := range st.StepHistory {
		if r.ID == id {
			return r.Status
		}
	}
	return wf.StepPending
}

func dumpHistory(ctx context.Context, c client.Client, run client.WorkflowRun, path string) error {
	iter := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	hist := &historypb.History{}
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			return fmt.Errorf("read history: %w", err)
		}
		hist.Events = append(hist.Events, ev)
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		return fmt.Errorf("marshal history: %w", err)
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// fakeActivities stands in for the real activities: behaviour is chosen by
// the step's rendered input ("fail": retryable|policy, "block": true, or
// "script": one outcome per attempt, a failure type or "ok").
type fakeActivities struct{}

// fakeWorker is the worker identity the fake reports.
const fakeWorker = "record-worker"

func (fakeActivities) RunStep(ctx context.Context, req activities.StepRequest) (*activities.StepResult, error) {
	attempt := activity.GetInfo(ctx).Attempt
	if req.Attempt > 0 { // numbered by the workflow (changeInfraRetries)
		attempt = req.Attempt
	}
	if script, ok := req.Input["script"].([]any); ok {
		if int(attempt) > len(script) {
			return nil, temporal.NewNonRetryableApplicationError("unscripted attempt", "Unscripted", nil)
		}
		if typ, _ := script[attempt-1].(string); typ != "ok" {
			return nil, failure.New(typ, fmt.Sprintf("scripted %s on attempt %d", typ, attempt),
				activities.StepFailureDetails{Attempt: attempt, ExitCode: -1, Worker: fakeWorker})
		}
		return &activities.StepResult{
			Output: map[string]any{"step": req.StepID, "attempt": attempt}, CheckpointID: "cp-" + req.StepID,
			Attempt: attempt, Worker: fakeWorker,
		}, nil
	}
	switch req.Input["fail"] {
	case "retryable":
		return nil, failure.New(activities.ErrTypeToolFailed, "tool exited 1",
			activities.StepFailureDetails{Attempt: attempt, CheckpointID: "cp-" + req.StepID + "-failed", ExitCode: 1})
	case "policy":
		return nil, failure.New(activities.ErrTypePolicy, "env name looks like a secret",
			activities.StepFailureDetails{Attempt: attempt})
	}
	if req.Input["block"] == true {
		for {
			activity.RecordHeartbeat(ctx, "exec")
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	return &activities.StepResult{
		Output:       map[string]any{"step": req.StepID, "echo": req.Input},
		CheckpointID: "cp-" + req.StepID,
		Attempt:      attempt,
	}, nil
}

func (fakeActivities) RunFinished(context.Context, activities.RunEvent) error { return nil }

// RunEnded: a worker without webhooks of its own.
func (fakeActivities) RunEnded(context.Context, activities.RunEvent) (bool, error) { return false, nil }

type scenario struct {
	name     string
	in       wf.Input
	asClient bool // set search attributes and memo at start, as agentctl does
	drive    func(context.Context, client.Client, client.WorkflowRun) error
	want     string
	check    func(*wf.Status) error // more than the run status, when the scenario needs it
}

// wantAttempts checks each step's attempt count.
func wantAttempts(want map[string]int32) func(*wf.Status) error {
	return func(st *wf.Status) error {
		for _, r := range st.StepHistory {
			if n, ok := want[r.ID]; ok && r.Attempts != n {
				return fmt.Errorf("step %s made %d attempts, want %d", r.ID, r.Attempts, n)
			}
		}
		return nil
	}
}

func step(id string, deps ...string) spec.PlanStep {
	return spec.PlanStep{
		ID: id, Tool: id + ":1.0", Image: "sha256:" + fmt.Sprintf("%064d", 1),
		DependsOn: deps, ExplicitDependsOn: deps, Timeout: 30 * time.Second,
	}
}

func plan(name string, steps ...spec.PlanStep) spec.Plan {
	return spec.Plan{SchemaVersion: spec.PlanSchemaVersion, Name: name, Version: "1.0.0", Steps: steps}
}

func scenarios() []scenario {
	linear := plan("linear", step("fetch"), step("extract", "fetch"), step("report", "extract"))
	linear.Inputs = []spec.InputDecl{{Name: "email_id", Type: spec.TypeString, Required: true}, {Name: "limit", Type: spec.TypeNumber, Default: 3}}
	linear.Steps[0].Inputs = map[string]any{"id": "{{ .inputs.email_id }}", "limit": "{{ .inputs.limit }}"}
	linear.Steps[1].Inputs = map[string]any{"step": "{{ .steps.fetch.output.step }}"}
	linear.Steps[2].Env = map[string]string{"DAY": "{{ now | date \"2006-01-02\" }}"}
	linear.Outputs = []spec.OutputDecl{{Name: "last", Value: "{{ .steps.report.output.step | upper }}"}}

	// a → {b (if false), c (fails after a retry), e (continue_on_error)};
	// d needs b and c → upstream_failed; f runs after e.
	diamond := plan("diamond", step("a"), step("b", "a"), step("c", "a"), step("d", "b", "c"), step("e", "a"), step("f", "e"))
	diamond.Steps[1].If = "{{ .steps.a.output.step == 'nope' }}"
	diamond.Steps[2].Inputs = map[string]any{"fail": "retryable"}
	diamond.Steps[2].Retries = 1
	diamond.Steps[4].Inputs = map[string]any{"fail": "policy"}
	diamond.Steps[4].Retries = 2
	diamond.Steps[4].ContinueOnError = true

	approval := plan("approval", step("draft"),
		spec.PlanStep{ID: "review", Approval: &spec.Approval{Prompt: "ship it?", Timeout: time.Hour}, DependsOn: []string{"draft"}, ExplicitDependsOn: []string{"draft"}},
		step("publish", "review"))
	approval.Steps[2].Inputs = map[string]any{"approved_by": "{{ .steps.review.output.by }}"}

	timeout := plan("approval-timeout",
		spec.PlanStep{ID: "gate", Approval: &spec.Approval{Prompt: "quick!", Timeout: 2 * time.Second}},
		step("after", "gate"))

	cancel := plan("cancel", step("quick"), step("slow", "quick"), step("later", "slow"),
		spec.PlanStep{ID: "gate", Approval: &spec.Approval{Prompt: "never answered"}, DependsOn: []string{"quick"}, ExplicitDependsOn: []string{"quick"}})
	cancel.Steps[1].Inputs = map[string]any{"block": true}

	badInput := plan("bad-input", step("a"))
	badInput.Inputs = []spec.InputDecl{{Name: "n", Type: spec.TypeNumber, Required: true}}

	resume := plan("resume", step("fetch"), step("summarize", "fetch"))
	resume.Steps[1].Inputs = map[string]any{"from": "{{ .steps.fetch.output.step }}"}

	// changeInfraRetries v1: a is lost once (infrastructure; no retries
	// needed), b fails as a tool once (its one retry) and loses the store
	// once, then succeeds; c reads both.
	infraRetries := plan("infra-retries", step("a"), step("b"), step("c", "a", "b"))
	infraRetries.Steps[0].Inputs = map[string]any{"script": []any{failure.SandboxLost, "ok"}}
	infraRetries.Steps[1].Inputs = map[string]any{"script": []any{failure.ToolFailed, failure.StoreUnavailable, "ok"}}
	infraRetries.Steps[1].Retries = 1
	infraRetries.Steps[2].Inputs = map[string]any{"a": "{{ .steps.a.output.attempt }}", "b": "{{ .steps.b.output.attempt }}"}

	// changeInfraRetries v2: the run's end in a local activity; RunFinished
	// only with somewhere to deliver (the spec's notify here).
	runEnd := plan("run-end", step("a"), step("b", "a"))
	runEndNotify := plan("run-end-notify", step("a"))
	runEndNotify.Notify = []string{"https://hooks.example/agentflow"}

	return []scenario{
		{name: "run-end-local", in: wf.Input{Plan: runEnd}, asClient: true, want: wf.RunSucceeded},
		{name: "run-end-notify", in: wf.Input{Plan: runEndNotify}, asClient: true, want: wf.RunSucceeded},
		{name: "infra-retries", in: wf.Input{Plan: infraRetries}, asClient: true, want: wf.RunSucceeded,
			check: wantAttempts(map[string]int32{"a": 2, "b": 3, "c": 1})},
		{name: "linear", in: wf.Input{Plan: linear, Inputs: map[string]any{"email_id": "m-1"}}, asClient: true, want: wf.RunSucceeded},
		{name: "diamond", in: wf.Input{Plan: diamond}, asClient: true, want: wf.RunFailed},
		{name: "approval", in: wf.Input{Plan: approval}, asClient: true, want: wf.RunSucceeded,
			drive: func(ctx context.Context, c client.Client, run client.WorkflowRun) error {
				// A stray signal first, then the decision once the step waits.
				if err := c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), wf.ApprovalSignal, wf.ApprovalDecision{Step: "nope", Approve: true}); err != nil {
					return err
				}
				if err := waitFor(ctx, c, run, func(st *wf.Status) bool { return stepStatus(st, "review") == wf.StepWaitingApproval }); err != nil {
					return err
				}
				return c.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), wf.ApprovalSignal,
					wf.ApprovalDecision{Step: "review", Approve: true, By: "alice", Comment: "lgtm"})
			}},
		{name: "approval-timeout", in: wf.Input{Plan: timeout}, want: wf.RunFailed},
		{name: "cancel", in: wf.Input{Plan: cancel}, asClient: true, want: wf.RunCanceled,
			drive: func(ctx context.Context, c client.Client, run client.WorkflowRun) error {
				if err := waitFor(ctx, c, run, func(st *wf.Status) bool {
					return stepStatus(st, "slow") == wf.StepRunning && stepStatus(st, "gate") == wf.StepWaitingApproval
				}); err != nil {
					return err
				}
				return c.CancelWorkflow(ctx, run.GetID(), run.GetRunID())
			}},
		{name: "bad-input", in: wf.Input{Plan: badInput, Inputs: map[string]any{"n": "x"}}, want: wf.RunFailed},
		{name: "resume", in: wf.Input{Plan: resume, ResumedFrom: "previous-run", Carry: map[string]wf.StepRecord{
			"fetch": {ID: "fetch", Status: wf.StepSuccess, Attempts: 1, CheckpointID: "cp-old", Output: map[string]any{"step": "fetch"}},
		}}, asClient: true, want: wf.RunSucceeded},
	}
}
