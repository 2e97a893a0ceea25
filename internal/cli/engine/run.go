package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/registry"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/workflows"
)

type runOptions struct {
	*Options
	submitFlags
	Name         string
	Wait         bool
	DryRun       bool
	PollInterval time.Duration
	// Offline: --dry-run checks on this machine only (no worker asked).
	Offline          bool
	PreflightTimeout time.Duration

	dial      dialer
	preflight preflightFunc
}

func newRunCmd(g *Options) *cobra.Command {
	o := &runOptions{Options: g, dial: dialerFor(g), preflight: preflightOnWorker}
	cmd := &cobra.Command{
		Use: "run -f spec.yaml [--name N] [--input k=v]... [--input-file f.json] [--wait] [--dry-run]",
		Long: `Parse, validate and compile the spec (exactly as 'validate'), type the inputs
against its declarations, resolve every 'tool: name:version' through the tool
registry to its digest-pinned image, and start an AgentWorkflow. The run
records the resolved images, so it is reproducible whatever is registered
later.

--wait shows live per-step progress (a table redrawn in place on a terminal,
one line per change otherwise), then the outputs; the exit code is 0 when
the agent SUCCEEDED and 1 otherwise. --dry-run does every check and starts
no agent: tools must be registered, and a worker of --task-queue checks,
without running any tool, that every step's image is present or pullable on
its Docker daemon, every secret resolves there (no value leaves the worker),
GPU requests can be served and egress hosts resolve; one line per check,
exit 2 when one fails, exit 1 when no worker answers within
--preflight-timeout. --offline checks secrets on this machine instead and
asks no worker.`,
		Example: `  agentctl run -f specs/daily-tech-news.yaml --wait
  agentctl run -f specs/complaint-handler.yaml --name complaint-42 --input email_id=42
  agentctl run -f spec.yaml --input-file inputs.json --input limit=5 --dry-run -o json
  agentctl run -f spec.yaml --dry-run --task-queue gpu --preflight-timeout 1m`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.File == "" {
				return usageErr("run: no spec given (use -f spec.yaml)")
			}
			if o.PreflightTimeout <= 0 {
				return usageErr("--preflight-timeout must be positive")
			}
			return runRun(cmd.Context(), o)
		},
	}
	o.register(cmd)
	f := cmd.Flags()
	f.StringVar(&o.Name, "name", "", "agent ID (workflow ID); default <spec-name>-<8 hex>")
	f.BoolVar(&o.Wait, "wait", false, "wait for the run, showing per-step progress; exit 1 unless it SUCCEEDED")
	f.BoolVar(&o.DryRun, "dry-run", false, "check everything (on a worker of --task-queue), start nothing")
	f.BoolVar(&o.Offline, "offline", false, "with --dry-run: check on this machine only, ask no worker")
	f.DurationVar(&o.PreflightTimeout, "preflight-timeout", workflows.DefaultPreflightTimeout, "with --dry-run: how long to wait for a worker's preflight report")
	f.DurationVar(&o.PollInterval, "poll-interval", defaultPollInterval, "status poll interval for --wait")
	_ = f.MarkHidden("poll-interval")
	return cmd
}

func runRun(ctx context.Context, o *runOptions) error {
	plan, err := o.loadSpec(o.Streams.Err)
	if err != nil {
		return err
	}
	inputs, err := o.inputs(plan)
	if err != nil {
		return err
	}
	if o.Name != "" {
		if err := validateAgentID(o.Name); err != nil {
			return err
		}
	}

	var c client.Client
	connect := func() (client.Client, error) {
		if c == nil {
			var err error
			if c, err = o.dial(ctx); err != nil {
				return nil, err
			}
		}
		return c, nil
	}
	defer func() {
		if c != nil {
			c.Close()
		}
	}()

	tools := map[string]string{}
	if len(toolRefs(plan)) > 0 {
		if _, err := connect(); err != nil {
			return err
		}
		if tools, err = o.resolve(ctx, c, plan); err != nil {
			return err
		}
	}

	if o.DryRun {
		return dryRun(ctx, o, plan, inputs, tools, connect)
	}
	if _, err := connect(); err != nil {
		return err
	}
	id := o.Name
	if id == "" {
		id = plan.Name + "-" + randomHex(4)
	}
	runID, err := startAgent(ctx, c, o.TaskQueue, id, workflows.Input{Plan: *plan, Inputs: inputs}, tools)
	if err != nil {
		return err
	}
	if !o.Wait {
		if o.Output == "json" {
			return writeJSON(o.Streams.Out, map[string]any{"id": id, "run_id": runID, "tools": tools})
		}
		fmt.Fprintf(o.Streams.Out, "agent:   %s\nrun:     %s\ninspect: agentctl inspect %s\n", id, runID, id)
		return nil
	}
	if o.Output != "json" {
		fmt.Fprintf(o.Streams.Out, "agent %s started (run %s)\n", id, runID)
	}
	st, err := waitForRun(ctx, c, waitConfig{
		AgentID: id, RunID: runID, Order: stepIDs(plan), Interval: o.PollInterval,
		Out: o.Streams.Out, Err: o.Streams.Err, TTY: o.Streams.IsTerminal, Quiet: o.Output == "json",
	})
	if err != nil {
		return waitInterrupted(id, err)
	}
	return finishWait(o.Options, st)
}

// startAgent starts an AgentWorkflow run under id. A running agent with the
// same ID is refused (exit 1); a closed one is reused, as resume needs.
func startAgent(ctx context.Context, c client.Client, taskQueue, id string, in workflows.Input, tools map[string]string) (string, error) {
	sa := temporal.NewSearchAttributes(
		temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrAgentName).ValueSet(id),
		temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrSpec).ValueSet(in.Plan.Name),
		temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrStatus).ValueSet(workflows.RunPending),
	)
	memo := agentMemo(&in.Plan, tools)
	if in.ResumedFrom != "" {
		memo["resumed_from"] = in.ResumedFrom
	}
	if taskQueue == "" {
		taskQueue = workflows.TaskQueue
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                taskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// Without this the SDK hands back the running execution instead of
		// reporting the conflict.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		Memo:                                     memo,
		TypedSearchAttributes:                    sa,
		StaticSummary:                            fmt.Sprintf("%s %s", in.Plan.Name, in.Plan.Version),
	}, workflows.WorkflowName, in)
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return "", serverErr("agent %q is already running (cancel it, wait for it, or pick another --name)", id)
		}
		if explained := missingSearchAttributes(err); explained != nil {
			return "", explained
		}
		return "", serverErr("start agent %s: %w", id, err)
	}
	return run.GetRunID(), nil
}

// agentMemo is the memo of an agent run: spec name and version, the
// resolved tools and the spec hash. Scheduled runs carry the same one.
func agentMemo(p *spec.Plan, tools map[string]string) map[string]any {
	memo := map[string]any{
		workflows.MemoSpecName:    p.Name,
		workflows.MemoSpecVersion: p.Version,
	}
	if len(tools) > 0 {
		memo["tools"] = tools
	}
	if p.SpecHash != "" {
		memo["spec_hash"] = p.SpecHash
	}
	return memo
}

// toolRefs lists the distinct name:version refs of tool steps, sorted.
func toolRefs(p *spec.Plan) []string {
	seen := map[string]bool{}
	var refs []string
	for _, s := range p.Steps {
		if s.Tool != "" && !seen[s.Tool] {
			seen[s.Tool] = true
			refs = append(refs, s.Tool)
		}
	}
	sort.Strings(refs)
	return refs
}

// resolveTools pins every tool step of plan to its registered image and
// returns ref → image. Unregistered tools are all listed at once (exit 2).
func resolveTools(ctx context.Context, rc *registry.Client, plan *spec.Plan, refs []string) (map[string]string, error) {
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	found, missing, err := rc.Resolve(qctx, refs)
	if err != nil {
		return nil, serverErr("resolve tools (is a worker running? the registry query needs one): %w", err)
	}
	if len(missing) > 0 {
		return nil, usageErr("unregistered tools: %s (register them with `agentctl tool register`)", strings.Join(missing, ", "))
	}
	tools := make(map[string]string, len(found))
	for i := range plan.Steps {
		s := &plan.Steps[i]
		if s.Tool == "" {
			continue
		}
		t := found[s.Tool]
		s.Image = t.Image
		tools[s.Tool] = t.Image
	}
	return tools, nil
}

func stepIDs(p *spec.Plan) []string {
	ids := make([]string, len(p.Steps))
	for i, s := range p.Steps {
		ids[i] = s.ID
	}
	return ids
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand documents it)
	return hex.EncodeToString(b)
}

// validateAgentID keeps agent IDs usable as workflow IDs, visibility
// values and log directory names.
func validateAgentID(id string) error {
	if len(id) > 200 {
		return usageErr("--name: at most 200 characters")
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:", r)
		if !ok {
			return usageErr("--name %q: use letters, digits, '-', '_', '.' or ':'", id)
		}
	}
	return nil
}

// secretCheck is one row of the dry-run secret report.
type secretCheck struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	OK     bool   `json:"ok"`
	Note   string `json:"note,omitempty"`
}

// checkSecrets checks each declared secret's source. env:// and file://
// are checked on this machine, which is where the worker runs in the
// default one-machine setup (a remote worker resolves them on its own
// machine); vault:// is resolved only by the worker.
func checkSecrets(p *spec.Plan, lookupEnv func(string) (string, bool), stat func(string) error) []secretCheck {
	var out []secretCheck
	for _, s := range p.Secrets {
		c := secretCheck{Name: s.Name, Source: s.Source}
		scheme, rest, _ := strings.Cut(s.Source, "://")
		switch scheme {
		case "env":
			if _, ok := lookupEnv(rest); ok {
				c.OK, c.Note = true, "set in this environment"
			} else {
				c.Note = fmt.Sprintf("$%s is not set here (the worker resolves it in its own environment)", rest)
			}
		case "file":
			if err := stat(rest); err == nil {
				c.OK, c.Note = true, "readable here"
			} else {
				c.Note = fmt.Sprintf("%v (the worker resolves it on its own machine)", err)
			}
		case "vault":
			c.OK, c.Note = true, "resolved by the worker (not checked here)"
		default:
			c.Note = "unsupported source (want env://, file:// or vault://)"
		}
		out = append(out, c)
	}
	return out
}

// dryRunReport is the -o json document of run --dry-run.
type dryRunReport struct {
	Spec    string            `json:"spec"`
	Version string            `json:"version"`
	Inputs  map[string]any    `json:"inputs"`
	Tools   map[string]string `json:"tools,omitempty"`
	// Secrets: the local check of --offline.
	Secrets []secretCheck `json:"secrets,omitempty"`
	// Preflight: the worker's report (without --offline).
	TaskQueue string                      `json:"task_queue,omitempty"`
	Preflight *activities.PreflightReport `json:"preflight,omitempty"`
	Steps     []dryRunStep                `json:"steps"`
	OK        bool                        `json:"ok"`
}

type dryRunStep struct {
	ID        string   `json:"id"`
	Kind      string   `json:"kind"` // tool, image, approval
	Tool      string   `json:"tool,omitempty"`
	Image     string   `json:"image,omitempty"`
	DependsOn []string `json:"depends_on,omitempty"`
	If        string   `json:"if,omitempty"`
}

// dryRun checks the inputs, asks a worker for its preflight (or, with
// --offline, checks secrets here), prints the report and exits 2 when a
// check failed.
func dryRun(ctx context.Context, o *runOptions, plan *spec.Plan, inputs map[string]any, tools map[string]string, connect func() (client.Client, error)) error {
	resolved, err := workflows.ResolveInputs(plan, inputs)
	if err != nil {
		return &ExitError{Code: ExitInvalid, Err: err}
	}
	rep := dryRunReport{Spec: plan.Name, Version: plan.Version, Inputs: resolved, Tools: tools, OK: true}
	if o.Offline {
		rep.Secrets = checkSecrets(plan, os.LookupEnv, func(p string) error { _, err := os.Stat(p); return err })
		for _, s := range rep.Secrets {
			rep.OK = rep.OK && s.OK
		}
	} else {
		c, err := connect()
		if err != nil {
			return err
		}
		agent := o.Name
		if agent == "" {
			agent = plan.Name
		}
		rep.TaskQueue = o.TaskQueue
		if rep.Preflight, err = o.preflight(ctx, c, o.TaskQueue, agent, plan, o.PreflightTimeout); err != nil {
			return err
		}
		// GPU steps run on the GPU queue's workers, not on the one that
		// answered: Temporal knows whether any polls it.
		rep.Preflight.Checks = append(rep.Preflight.Checks, gpuQueueChecks(ctx, c, o.Namespace, o.TaskQueue, plan)...)
		rep.OK = rep.Preflight.Failed() == 0
	}
	for _, s := range plan.Steps {
		ds := dryRunStep{ID: s.ID, Tool: s.Tool, Image: s.Image, DependsOn: s.DependsOn, If: s.If}
		switch {
		case s.Approval != nil:
			ds.Kind = "approval"
		case s.Tool != "":
			ds.Kind = "tool"
		default:
			ds.Kind = "image"
		}
		rep.Steps = append(rep.Steps, ds)
	}
	if o.Output == "json" {
		if err := writeJSON(o.Streams.Out, rep); err != nil {
			return err
		}
	} else {
		printDryRun(o.Streams.Out, rep)
	}
	switch {
	case rep.OK:
		return nil
	case rep.Preflight != nil:
		return &ExitError{Code: ExitInvalid, Err: fmt.Errorf("dry run: %d of %d checks failed on worker %s",
			rep.Preflight.Failed(), len(rep.Preflight.Checks), rep.Preflight.Worker)}
	default:
		return &ExitError{Code: ExitInvalid, Err: errors.New("dry run: some secrets are not resolvable")}
	}
}
