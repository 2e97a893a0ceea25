package activities

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/capacity"
	"github.com/agentflow/agentflow/internal/expr"
	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/internal/logstore"
	"github.com/agentflow/agentflow/internal/metrics"
	"github.com/agentflow/agentflow/internal/secrets"
)

// Labels RunStep sets on every sandbox, so an operator (and the reaper's
// logs) can tell which agent, step and attempt a container belongs to.
const (
	LabelAgentID = "agentflow.agent_id"
	LabelRunID   = "agentflow.run_id"
	LabelStepID  = "agentflow.step_id"
	LabelAttempt = "agentflow.attempt"
	// LabelGPUDevices: the GPU devices the attempt holds (comma-separated),
	// on the sandboxes of GPU steps pinned to devices, also under
	// --gpu-policy ignore, where the sandbox gets none of them.
	LabelGPUDevices = "agentflow.gpu_devices"
)

// ExecutionIDFor derives the sandbox's ExecutionID from the attempt's
// identity. Activities are at-least-once: a re-delivered attempt gets the
// same ID, so the host adopts or replaces what the lost delivery left
// behind instead of creating a second sandbox. A new attempt (retry) gets a
// new ID. Hashing keeps it short and safe as a container name whatever the
// agent ID contains.
func ExecutionIDFor(agentID, runID, stepID string, attempt int32) exechost.ExecutionID {
	h := sha256.New()
	for _, s := range []string{agentID, runID, stepID, strconv.Itoa(int(attempt))} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return exechost.ExecutionID("af-" + hex.EncodeToString(h.Sum(nil))[:16])
}

// RunStep runs one attempt of one tool step: resolve the step's secrets,
// provision a sandbox with the step's image, limits and workspace, exec
// /bin/tool with the input JSON on stdin, checkpoint the workspace and
// terminate the sandbox (always, also on failure and cancellation). It
// heartbeats throughout, so a cancellation arrives within one heartbeat
// interval (the host then SIGTERMs the tool and destroys the sandbox after
// the grace period) and a dead worker is noticed within one heartbeat
// timeout.
//
// Every outcome, success or whatever failed, leaves through finish once:
// it writes the attempt's log, records metrics and classifies the error.
func (a *Activities) RunStep(ctx context.Context, req StepRequest) (*StepResult, error) {
	ctx, stop := a.watchHandBack(ctx)
	defer stop()
	at := a.newAttempt(ctx, req)
	ctx = at.startSpan(ctx)
	start := time.Now()
	// Visible while it runs: a stuck attempt shows before it ends.
	defer a.opts.Metrics.AttemptRunning(at.budget.StartToClose)()
	res, err := at.run(ctx)
	if hb := handBackError(ctx); hb != nil && err != nil && failure.Kind(err) == failure.Canceled {
		// Whatever step the hand-back interrupted saw a canceled context.
		err = hb
	}
	terr := at.finish(ctx, start, err)
	at.endSpan(err)
	return res, terr
}

// attempt is the state of one RunStep call.
type attempt struct {
	a      *Activities
	req    StepRequest
	number int32
	id     exechost.ExecutionID
	budget Budget
	scrub  *scrubber
	redact []string // secret values and their JSON forms: kept out of the checkpoint
	log    *slog.Logger
	stdout []byte
	stderr []byte
	// The attempt's log while the tool runs: the host streams stderr
	// through logz (scrubbed) into logw (chunks in the log store).
	logw *logstore.Writer
	logz *scrubStream
	// redelivered: Temporal delivers this numbered attempt again (its
	// activity attempt > 1), so a record of the attempt itself may exist.
	redelivered bool
	// adoptedFrom is the earlier attempt whose recorded result this one
	// returned without running the tool (0: the tool ran).
	adoptedFrom int32
	// egress collects the connections of a sandbox with egress rules.
	egress *egressLog
	// gpuDevices are the worker's GPU devices this attempt holds until its
	// sandbox is gone (none: no GPUs, or a worker that does not pin).
	gpuDevices []string
	// span is the attempt's trace span (trace.go); the sandbox phases are
	// its children.
	span trace.Span
}

func (a *Activities) newAttempt(ctx context.Context, req StepRequest) *attempt {
	info := activity.GetInfo(ctx)
	number := attemptNumber(req.Attempt, info.Attempt)
	at := &attempt{
		a:           a,
		req:         req,
		number:      number,
		redelivered: req.Attempt > 0 && info.Attempt > 1,
		id:          ExecutionIDFor(req.AgentID, req.RunID, req.StepID, number),
		budget:      BudgetFor(req.Timeout),
		scrub:       newScrubber(nil),
		egress:      &egressLog{metrics: a.opts.Metrics, tool: toolName(req)},
	}
	at.log = a.log.With("agent_id", req.AgentID, "run_id", req.RunID, "step_id", req.StepID,
		"attempt", number, "tool", toolName(req), "execution_id", string(at.id), "worker", a.opts.Identity)
	return at
}

// attemptNumber is the attempt's number: the workflow's when it sets one,
// else (runs recorded before StepRequest.Attempt existed) the activity's.
func attemptNumber(requested, activityAttempt int32) int32 {
	switch {
	case requested > 0:
		return requested
	case activityAttempt > 0:
		return activityAttempt
	}
	return 1
}

// run is the attempt itself. It returns a *stepError, a context error
// (canceled) or, for what nothing classified, a plain error (SandboxLost);
// it writes no log and records no outcome metric: finish does.
func (at *attempt) run(ctx context.Context) (*StepResult, error) {
	a, req := at.a, at.req
	if err := validateRequest(req); err != nil {
		return nil, err
	}
	gpus, gpuIgnored, gpuErr := a.gpuRequest(req)
	if gpuErr != nil {
		return nil, gpuErr
	}
	if gpuIgnored {
		at.log.WarnContext(ctx, "step requests GPUs but the sandbox host has none; running it without (gpu-policy ignore)",
			"gpus_requested", req.Resources.GPUs)
		at.req.Resources.GPUs = gpus
	}

	hb := startHeartbeat(ctx, a.opts.HeartbeatInterval, a.opts.Identity)
	defer hb.stop()

	// An earlier attempt may have finished with its report lost: adopt
	// its recorded result instead of running the tool twice.
	hb.setPhase("adopt")
	if res, err := at.adopt(ctx); res != nil || err != nil {
		return res, err
	}

	// The worker's budget must hold the step's declared size, and its GPU
	// devices the step's GPUs, before its sandbox starts; waiting
	// heartbeats, so a cancel or a lost worker is still noticed. Given
	// back after the sandbox is gone (defers run in reverse: this one after
	// terminate's), whatever ended the attempt. req is the step as
	// requested: under --gpu-policy ignore its devices are held too.
	if a.opts.Capacity != nil {
		hb.setPhase("capacity")
		lease, err := a.opts.Capacity.Charge(ctx, capacity.Size{
			NanoCPUs: req.Resources.NanoCPUs, MemoryBytes: req.Resources.MemoryBytes, GPUs: req.Resources.GPUs})
		var tooLarge *capacity.TooLargeError
		switch {
		case errors.As(err, &tooLarge) && tooLarge.TooManyGPUs():
			return nil, gpuTooMany(req.StepID, a.opts.Identity, tooLarge)
		case errors.As(err, &tooLarge):
			return nil, failf(ErrTypePolicy, "step %s cannot run on worker %s: %v (raise --cpu-budget/--memory-budget, or lower its resources)",
				req.StepID, a.opts.Identity, err)
		case err != nil:
			return nil, err
		}
		defer lease.Release()
		if at.gpuDevices = lease.Devices; len(at.gpuDevices) > 0 {
			at.log.InfoContext(ctx, "GPU devices assigned", "gpu_devices", strings.Join(at.gpuDevices, ","), "gpu_ignored", gpuIgnored)
		}
	}

	values, err := a.resolveSecrets(ctx, req.SecretSources)
	if err != nil {
		return nil, err
	}
	secretValues := make([]string, 0, len(values))
	for _, v := range values {
		secretValues = append(secretValues, v)
	}
	at.scrub = newScrubber(secretValues)
	at.redact = secretForms(secretValues)

	stdin, plainEnv, execSecrets, err := prepareInput(req, values)
	if err != nil {
		return nil, err
	}
	egress, err := at.egressPolicy(values)
	if err != nil {
		return nil, err
	}

	// Terminate is deferred before Provision: a provision that fails half
	// way (daemon hiccup, cancellation) may still have created a container.
	// Terminate of an unknown execution is a no-op.
	provisioned := false
	defer func() { at.terminate(ctx, provisioned) }()

	hb.setPhase("provision")
	exe, err := at.provision(ctx, plainEnv, egress)
	if err != nil {
		return nil, err
	}
	provisioned = true
	a.opts.Metrics.SandboxUp()
	at.span.SetAttributes(attribute.String(AttrImageDigest, exe.ImageDigest))

	hb.setPhase("exec")
	stderr := at.openLog(ctx) // live stderr → the log store, scrubbed
	execCtx, endExec := at.phase(ctx, metrics.PhaseExec)
	res, execErr := a.opts.Host.Exec(execCtx, at.id, exechost.ExecRequest{
		Command: ToolCommand,
		Stdin:   stdin,
		Env:     toolEnv(req, at.number, gpuIgnored, at.gpuDevices),
		Secrets: execSecrets,
		Timeout: at.budget.ToolDeadline,
		Stderr:  stderr,
	})
	if res != nil {
		trace.SpanFromContext(execCtx).SetAttributes(attribute.Int(AttrExitCode, res.ExitCode))
	}
	endExec(execErr)
	if res != nil {
		at.stdout, at.stderr = res.Stdout, res.Stderr
		a.opts.Metrics.ObserveOutput(len(res.Stdout))
	}
	if err := canceled(ctx); err != nil {
		// The host has already sent SIGTERM and destroyed the sandbox
		// after the grace period.
		return nil, err
	}
	if execErr != nil {
		return nil, at.execFailure(execErr, res)
	}

	output, fail := at.classify(res)

	// Every finished attempt is checkpointed, failed ones too: the failed
	// attempt's workspace is what a user debugs.
	hb.setPhase("checkpoint")
	cp, cpErr := at.checkpoint(ctx)
	if err := canceled(ctx); err != nil {
		return nil, err
	}
	if fail != nil {
		if cpErr != nil {
			at.log.WarnContext(ctx, "checkpoint of failed attempt", "error", at.scrub.String(cpErr.Error()))
		} else {
			fail.Details.CheckpointID = string(cp.CheckpointID)
		}
		return nil, fail
	}
	if cpErr != nil {
		return nil, at.checkpointFailure(cpErr, res)
	}
	result := &StepResult{
		Output:       output,
		CheckpointID: string(cp.CheckpointID),
		Attempt:      at.number,
		OutputBytes:  len(res.Stdout),
		ImageDigest:  exe.ImageDigest,
		Worker:       a.opts.Identity,
	}
	// Recorded before it is reported: a report lost after this point is
	// adopted by the next attempt.
	hb.setPhase("record")
	if err := at.record(ctx, result); err != nil {
		return nil, err
	}
	return result, nil
}

// canceled is the one cancellation check: the activity was canceled, its
// deadline passed, or its worker handed it back (SandboxLost). Whatever the
// host returned is then moot.
func canceled(ctx context.Context) error {
	if hb := handBackError(ctx); hb != nil {
		return hb
	}
	return ctx.Err()
}

// toolEnv is the agentflow environment every tool exec gets.
func toolEnv(req StepRequest, number int32, gpuIgnored bool, gpuDevices []string) map[string]string {
	env := map[string]string{
		"AGENTFLOW_AGENT_ID": req.AgentID,
		"AGENTFLOW_STEP_ID":  req.StepID,
		"AGENTFLOW_ATTEMPT":  strconv.Itoa(int(number)),
	}
	if gpuIgnored {
		env[EnvGPUIgnored] = "1"
	}
	if len(gpuDevices) > 0 {
		env[EnvGPUDevices] = strings.Join(gpuDevices, ",")
	}
	return env
}

func validateRequest(req StepRequest) error {
	switch {
	case req.AgentID == "" || req.RunID == "" || req.StepID == "":
		return failf(ErrTypeInvalidInput, "step request needs agent_id, run_id and step_id")
	case req.Image == "":
		return failf(ErrTypeInvalidInput, "step %s has no image (tools are resolved to digests at submission)", req.StepID)
	case req.Timeout <= 0:
		// The compiled Plan gives every tool step a timeout; a request
		// without one was built by hand, and guessing a budget here would
		// make it differ from the workflow's StartToClose.
		return failf(ErrTypeInvalidInput, "step %s has no timeout (the compiled plan sets one for every tool step)", req.StepID)
	case req.Git != nil && len(req.Checkpoints) > 0:
		return failf(ErrTypeInvalidInput, "step %s has both a git workspace and checkpoints", req.StepID)
	}
	return nil
}

func toolName(req StepRequest) string {
	if req.Tool != "" {
		return req.Tool
	}
	return "image"
}

// resolveSecrets resolves exactly the step's secrets. A secret that cannot
// be resolved is InvalidInput, one the worker's policy (or the secret
// store) refuses is PolicyViolation (neither is retried), one whose store
// cannot answer now is SecretUnavailable (infrastructure, retried):
// failure.SecretType decides. The error names the secret and its source,
// never a value.
func (a *Activities) resolveSecrets(ctx context.Context, sources map[string]string) (map[string]string, error) {
	if len(sources) == 0 {
		return map[string]string{}, nil
	}
	if a.opts.Secrets == nil {
		return nil, failf(ErrTypeInvalidInput, "step needs %d secret(s) but this worker has no secret resolver", len(sources))
	}
	values, err := secrets.Resolve(ctx, a.opts.Secrets, sources)
	if err != nil {
		if cerr := canceled(ctx); cerr != nil {
			return nil, cerr // interrupted, not unresolvable
		}
		typ := failure.SecretType(err)
		switch typ {
		case ErrTypePolicy:
			// The worker's secret policy (or Vault) refused it: never
			// retried; the operator's log says which source and flag.
			a.log.Warn("secret source refused by the worker's policy", "error", err.Error())
		case failure.SecretUnavailable:
			a.log.Warn("secret store unavailable; the attempt is retried", "error", err.Error())
		}
		return nil, failf(typ, "resolve %v", err)
	}
	return values, nil
}

// prepareInput substitutes secrets into the input (strings that are
// exactly {{ .secrets.NAME }}) and splits env into plain entries (baked
// into the sandbox) and secret entries (exported to the exec only).
func prepareInput(req StepRequest, values map[string]string) (stdin []byte, plain, secretEnv map[string]string, err error) {
	input := map[string]any{}
	if req.Input != nil {
		input = req.Input
	}
	substituted, err := expr.SubstituteSecrets(input, values)
	if err != nil {
		return nil, nil, nil, failf(ErrTypeInvalidInput, "substitute secrets into the input of step %s: %v", req.StepID, err)
	}
	stdin, err = json.Marshal(substituted)
	if err != nil {
		return nil, nil, nil, failf(ErrTypeInvalidInput, "encode input of step %s: %v", req.StepID, err)
	}
	plain = map[string]string{}
	secretEnv = map[string]string{}
	for k, v := range req.Env {
		if name, ok := secretRef(v); ok {
			val, found := values[name]
			if !found {
				return nil, nil, nil, failf(ErrTypeInvalidInput, "env %s of step %s references secret %s, which the step does not declare", k, req.StepID, name)
			}
			secretEnv[k] = val
			continue
		}
		plain[k] = v
	}
	return stdin, plain, secretEnv, nil
}

// secretRef reports whether s is exactly a secret expression.
func secretRef(s string) (string, bool) {
	t, err := expr.Parse(s)
	if err != nil {
		return "", false
	}
	return t.SecretName()
}

// provision creates the attempt's sandbox: network none, or (egress not
// nil) the host's egress boundary with the step's rules.
func (at *attempt) provision(ctx context.Context, env map[string]string, egress *exechost.EgressPolicy) (*exechost.Execution, error) {
	req := at.req
	labels := map[string]string{
		LabelAgentID: truncate(req.AgentID, 256),
		LabelRunID:   truncate(req.RunID, 256),
		LabelStepID:  truncate(req.StepID, 256),
		LabelAttempt: strconv.Itoa(int(at.number)),
	}
	if len(at.gpuDevices) > 0 {
		labels[LabelGPUDevices] = strings.Join(at.gpuDevices, ",")
	}
	for k, v := range at.a.opts.Labels {
		labels[k] = v
	}
	ws := exechost.Workspace{}
	phase := metrics.PhaseProvision
	if req.Git != nil {
		ws.Git = &exechost.GitSource{RepositoryPath: req.Git.Repository, Revision: req.Git.Revision}
	}
	if len(req.Checkpoints) > 0 {
		phase = metrics.PhaseRestore // provisioning from checkpoints is a restore
		for _, c := range req.Checkpoints {
			ws.Checkpoints = append(ws.Checkpoints, exechost.CheckpointID(c))
		}
	}
	r := req.Resources
	network := exechost.NetworkNone
	if egress != nil {
		network = exechost.NetworkEgress
	}
	limits := exechost.ResourceLimits{
		NanoCPUs:       r.NanoCPUs,
		MemoryBytes:    r.MemoryBytes,
		DiskBytes:      r.DiskBytes,
		Pids:           r.Pids,
		Runtime:        at.budget.SandboxRuntime,
		MaxOutputBytes: r.MaxOutputBytes,
		GPUs:           r.GPUs,
	}
	if r.GPUs != 0 && len(at.gpuDevices) > 0 {
		// Exactly the attempt's devices ("all" is all of this worker's).
		// Not under --gpu-policy ignore (r.GPUs is 0 there): the host
		// cannot attach any.
		limits.GPUs, limits.GPUDevices = len(at.gpuDevices), at.gpuDevices
	}
	pctx, endProvision := at.phase(ctx, phase)
	exe, err := at.a.opts.Host.Provision(pctx, exechost.ProvisionRequest{
		ExecutionID: at.id,
		Image:       req.Image,
		Workspace:   ws,
		Resources:   limits,
		Network:     network,
		Egress:      egress,
		Env:         env,
		Labels:      labels,
	})
	endProvision(err)
	if err != nil {
		if cerr := canceled(ctx); cerr != nil {
			return nil, cerr
		}
		// Provisioning runs no tool: a host timeout is a lost sandbox.
		se := failf(failure.HostType(err, false), "provision sandbox for step %s: %s", req.StepID, at.scrub.String(err.Error()))
		se.Details.Attempt = at.number
		return nil, se
	}
	return exe, nil
}

// execFailure classifies an Exec that returned an error (the sandbox is
// gone: the host destroys it on timeout, output overflow and abort).
func (at *attempt) execFailure(err error, res *exechost.ExecResult) *stepError {
	typ := failure.HostType(err, true)
	se := &stepError{Type: typ, Details: at.details(res)}
	switch typ {
	case ErrTypeTimeout:
		se.Msg = fmt.Sprintf("tool did not finish within the step timeout of %s; the sandbox was destroyed", at.budget.ToolDeadline)
	case ErrTypeOutputLimit:
		se.Msg = fmt.Sprintf("tool wrote more than max_output (%d bytes) to stdout and stderr combined; the sandbox was destroyed", at.req.Resources.MaxOutputBytes)
	case ErrTypePolicy:
		se.Msg = "exec refused by sandbox policy: " + at.scrub.String(err.Error())
	default:
		se.Type = ErrTypeSandboxLost
		se.Msg = "sandbox lost during exec: " + at.scrub.String(err.Error())
	}
	return se
}

// checkpointFailure classifies a failed checkpoint of a successful
// attempt. The tool has finished: a host timeout or size cap here is the
// sandbox's, not the tool's.
func (at *attempt) checkpointFailure(err error, res *exechost.ExecResult) *stepError {
	se := &stepError{
		Type:    failure.HostType(err, false),
		Msg:     "checkpoint workspace: " + at.scrub.String(err.Error()),
		Details: at.details(res),
	}
	if pe := (*exechost.PolicyError)(nil); errors.As(err, &pe) && pe.Field == exechost.PolicyFieldRedact {
		// A name cannot be redacted without breaking what refers to it;
		// PolicyViolation is not retried: a retry would write it again.
		se.Msg = "checkpoint workspace: a workspace entry name (or symlink target) contains a secret value; " +
			"secrets may be written into files, never into file names"
	}
	return se
}

func (at *attempt) details(res *exechost.ExecResult) StepFailureDetails {
	d := StepFailureDetails{Attempt: at.number, ExitCode: -1, Worker: at.a.opts.Identity}
	if res != nil {
		d.ExitCode = res.ExitCode
		d.StderrTail = tail(string(at.scrub.Bytes(res.Stderr)), at.a.opts.StderrTail)
	}
	return d
}

func (at *attempt) checkpoint(ctx context.Context) (*exechost.Checkpoint, error) {
	ctx, end := at.phase(ctx, metrics.PhaseCheckpoint)
	cp, err := at.a.opts.Host.Checkpoint(ctx, at.id, exechost.CheckpointRequest{
		Reason: fmt.Sprintf("step %s attempt %d", at.req.StepID, at.number),
		// Secrets the tool wrote into /workspace are stored as '*'s of the
		// same length, so no dependent step restores them.
		Redact: at.redact,
	})
	end(err)
	if err == nil {
		at.a.opts.Metrics.ObserveCheckpoint(cp.SizeBytes)
	}
	return cp, err
}

// terminate always runs, on a context that survives the activity's
// cancellation but is still bounded.
func (at *attempt) terminate(ctx context.Context, provisioned bool) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), at.a.opts.CleanupTimeout)
	defer cancel()
	cctx, end := at.phase(cctx, metrics.PhaseTerminate)
	err := at.a.opts.Host.Terminate(cctx, at.id)
	end(err)
	if provisioned {
		at.a.opts.Metrics.SandboxDown()
	}
	if err != nil {
		// The reaper removes what is left (the sandbox also expires on its
		// own deadline); the attempt's outcome stands.
		at.log.WarnContext(ctx, "terminate sandbox", "error", at.scrub.String(err.Error()))
	}
}

// openLog starts the attempt's log in the store and returns the writer
// the host streams stderr into (scrubbed on the way), or nil when there is
// no log store. Logs are best effort: a store that is down is retried by
// the log writer and logged, never an attempt failure.
func (at *attempt) openLog(ctx context.Context) io.Writer {
	if at.a.opts.Logs == nil {
		return nil
	}
	w, err := at.a.opts.Logs.Open(ctx, at.logKey())
	if err != nil {
		at.log.WarnContext(ctx, "open step log", "error", err)
		return nil
	}
	at.logw, at.logz = w, at.scrub.Stream(w)
	return at.logz
}

func (at *attempt) logKey() logstore.Key {
	return logstore.Key{AgentID: at.req.AgentID, RunID: at.req.RunID, StepID: at.req.StepID, Attempt: at.number}
}

// writeLog ends the attempt's log: the stderr streamed while the tool ran
// (or, from a host that streams none, ExecResult.Stderr) and, when the
// attempt failed (failMsg != ""), its stdout and the failure line; then
// the end marker. Scrubbed; best effort: a log store problem never changes
// the attempt's outcome.
func (at *attempt) writeLog(ctx context.Context, failMsg, outcome string) {
	if at.a.opts.Logs == nil || at.adoptedFrom == at.number {
		// Adopting its own first delivery's result: that delivery ran the
		// tool and wrote this attempt's log; a new writer would replace it
		// with one line (the latest Open wins).
		return
	}
	// The log outlives the attempt's cancellation, within a bound.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), at.a.opts.CleanupTimeout)
	defer cancel()
	if at.logw == nil && at.openLog(cctx) == nil { // failed before the exec
		return
	}
	// The host has handed over all stderr when Exec returns; what the
	// scrubber holds back is the end of it.
	if err := at.logz.Flush(); err != nil {
		at.log.WarnContext(ctx, "write step log", "error", err)
	}
	streamed, last := at.logz.Written()
	var buf bytes.Buffer
	if streamed == 0 {
		buf.Write(at.scrub.Bytes(at.stderr))
	}
	// newline ends the log so far with one unless it is empty or ends so.
	newline := func() {
		if buf.Len() > 0 && !bytes.HasSuffix(buf.Bytes(), []byte("\n")) || buf.Len() == 0 && streamed > 0 && last != '\n' {
			buf.WriteByte('\n')
		}
	}
	// Every connection through the egress boundary, allowed or refused
	// (complete: the host delivers none after Terminate, which ran).
	if lines := at.egress.lines(); lines != "" {
		newline()
		buf.WriteString(at.scrub.String(lines))
	}
	if failMsg != "" {
		if len(at.stdout) > 0 {
			newline()
			buf.WriteString("--- stdout ---\n")
			buf.Write(at.scrub.Bytes(at.stdout))
		}
		newline()
		fmt.Fprintf(&buf, "--- agentflow: attempt %d failed: %s\n", at.number, at.scrub.String(failMsg))
	}
	if at.adoptedFrom > 0 {
		fmt.Fprintf(&buf, "--- agentflow: attempt %d adopted the recorded result of attempt %d; the tool did not run again\n", at.number, at.adoptedFrom)
	}
	err := at.logw.Close(cctx, logstore.Trailer{Text: buf.Bytes(), Outcome: at.scrub.String(outcome)})
	if err != nil {
		at.log.WarnContext(ctx, "write step log", "error", err)
	}
}

// finish is the attempt's one exit: whatever happened, it writes the
// attempt's log (stderr; on failure also stdout and the failure line, so
// `agentctl logs` shows a line for every failed attempt whatever failed),
// records the outcome metrics, and returns the error as Temporal sees it.
func (at *attempt) finish(ctx context.Context, start time.Time, err error) error {
	kind := failure.Kind(err)
	status := metrics.InvocationStatus(kind)
	switch {
	case err == nil:
		at.writeLog(ctx, "", "success")
	case kind == failure.Canceled:
		at.writeLog(ctx, "attempt canceled", "canceled")
	default:
		msg := err.Error()
		var se *stepError
		if errors.As(err, &se) {
			msg = se.Msg
		}
		at.writeLog(ctx, msg, "failed: "+kind)
	}
	m := at.a.opts.Metrics
	tool := toolName(at.req)
	if m != nil {
		if at.adoptedFrom > 0 {
			m.AttemptAdopted(tool) // no tool ran: not an invocation
		} else {
			var detail string
			var se *stepError
			if errors.As(err, &se) {
				detail = se.Reason
			}
			m.ToolInvoked(tool, kind, detail, time.Since(start))
		}
		if at.number > 1 {
			m.StepRetries.WithLabelValues(tool).Inc()
		}
		if err != nil && kind != failure.Canceled {
			m.AttemptFailed(tool, failureClass(kind), kind)
		}
	}
	if err != nil {
		var se *stepError
		if errors.As(err, &se) {
			// Every failure names its attempt and worker, also those
			// classified before the sandbox existed.
			se.Details.Attempt, se.Details.Worker = at.number, at.a.opts.Identity
		} else if kind != failure.Canceled {
			// What nothing classified leaves as SandboxLost (toTemporal),
			// scrubbed: its message goes to history and to the trace.
			err = &stepError{Type: failure.SandboxLost, Msg: at.scrub.String(err.Error()),
				Details: StepFailureDetails{Attempt: at.number, ExitCode: -1, Worker: at.a.opts.Identity}}
		}
		at.log.InfoContext(ctx, "step attempt failed", "status", status, "type", kind, "duration_ms", time.Since(start).Milliseconds(),
			"error", at.scrub.String(err.Error()))
		return toTemporal(err)
	}
	if at.adoptedFrom > 0 {
		at.log.InfoContext(ctx, "step attempt adopted the recorded result of an earlier attempt; the tool did not run again",
			"adopted_from", at.adoptedFrom, "duration_ms", time.Since(start).Milliseconds())
		return nil
	}
	at.log.InfoContext(ctx, "step attempt succeeded", "duration_ms", time.Since(start).Milliseconds())
	return nil
}

// failureClass sorts a failure type for metrics: infrastructure (retried
// on its own budget), tool (retryable and about the tool: counts against
// the step's retries) or other (never retried).
func failureClass(typ string) string {
	switch {
	case failure.Infrastructure(typ):
		return metrics.FailureInfrastructure
	case failure.Retryable(typ):
		return metrics.FailureTool
	}
	return metrics.FailureOther
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) { // never split a rune
		i++
	}
	return "…" + s[i:]
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence
// (Docker refuses label values that are not valid UTF-8).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) { // s[i] is the first byte cut off
		i--
	}
	return s[:i]
}
