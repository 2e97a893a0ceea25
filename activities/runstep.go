package activities

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/expr"
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
func (a *Activities) RunStep(ctx context.Context, req StepRequest) (*StepResult, error) {
	res, err := a.runStep(ctx, req)
	if err != nil {
		return nil, toTemporal(err)
	}
	return res, nil
}

// attempt is the state of one RunStep call.
type attempt struct {
	a       *Activities
	req     StepRequest
	number  int32
	id      exechost.ExecutionID
	scrub   *scrubber
	redact  []string // secret values and their JSON forms: kept out of the checkpoint
	log     *slog.Logger
	stdout  []byte
	stderr  []byte
	outcome string // metrics status: success, a failure type, canceled
}

func (a *Activities) runStep(ctx context.Context, req StepRequest) (_ *StepResult, err error) {
	number := activity.GetInfo(ctx).Attempt
	if number < 1 {
		number = 1
	}
	at := &attempt{
		a:      a,
		req:    req,
		number: number,
		id:     ExecutionIDFor(req.AgentID, req.RunID, req.StepID, number),
		scrub:  newScrubber(nil),
	}
	at.log = a.log.With("agent_id", req.AgentID, "run_id", req.RunID, "step_id", req.StepID,
		"attempt", number, "tool", toolName(req), "execution_id", string(at.id))

	start := time.Now()
	defer func() { at.finish(ctx, start, err) }()

	if err := validateRequest(req); err != nil {
		return nil, err
	}
	gpus, gpuIgnored, gpuErr := a.gpuRequest(req)
	if gpuErr != nil {
		at.writeLog(ctx, gpuErr.Msg)
		return nil, gpuErr
	}
	if gpuIgnored {
		at.log.WarnContext(ctx, "step requests GPUs but the sandbox host has none; running it without (gpu-policy ignore)",
			"gpus_requested", req.Resources.GPUs)
		at.req.Resources.GPUs = gpus
	}

	hb := startHeartbeat(ctx, a.opts.HeartbeatInterval)
	defer hb.stop()

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

	// Terminate is deferred before Provision: a provision that fails half
	// way (daemon hiccup, cancellation) may still have created a container.
	// Terminate of an unknown execution is a no-op.
	provisioned := false
	defer func() { at.terminate(ctx, provisioned) }()

	hb.setPhase("provision")
	exe, err := at.provision(ctx, plainEnv)
	if err != nil {
		return nil, err
	}
	provisioned = true
	a.opts.Metrics.SandboxUp()

	hb.setPhase("exec")
	execStart := time.Now()
	res, execErr := a.opts.Host.Exec(ctx, at.id, exechost.ExecRequest{
		Command: ToolCommand,
		Stdin:   stdin,
		Env:     toolEnv(req, number, gpuIgnored),
		Secrets: execSecrets,
		Timeout: stepTimeout(req),
	})
	a.opts.Metrics.ObservePhase(metrics.PhaseExec, time.Since(execStart), execErr)
	if res != nil {
		at.stdout, at.stderr = res.Stdout, res.Stderr
		a.opts.Metrics.ObserveOutput(len(res.Stdout))
	}
	if ctx.Err() != nil {
		// Canceled (or the activity deadline passed): the host has already
		// sent SIGTERM and destroyed the sandbox after the grace period.
		at.writeLog(ctx, "attempt canceled")
		return nil, ctx.Err()
	}
	if execErr != nil {
		se := at.execFailure(execErr, res)
		at.writeLog(ctx, se.Msg)
		return nil, se
	}

	output, fail := at.classify(res)

	// Every finished attempt is checkpointed, failed ones too: the failed
	// attempt's workspace is what a user debugs.
	hb.setPhase("checkpoint")
	cp, cpErr := at.checkpoint(ctx)
	if ctx.Err() != nil {
		at.writeLog(ctx, "attempt canceled")
		return nil, ctx.Err()
	}
	if fail != nil {
		if cpErr != nil {
			at.log.WarnContext(ctx, "checkpoint of failed attempt", "error", at.scrub.String(cpErr.Error()))
		} else {
			fail.Details.CheckpointID = string(cp.CheckpointID)
		}
		at.writeLog(ctx, fail.Msg)
		return nil, fail
	}
	if cpErr != nil {
		se := &stepError{
			Type:    hostErrorType(cpErr),
			Msg:     "checkpoint workspace: " + at.scrub.String(cpErr.Error()),
			Details: at.details(res),
		}
		if pe := (*exechost.PolicyError)(nil); errors.As(cpErr, &pe) && pe.Field == exechost.PolicyFieldRedact {
			// A name cannot be redacted without breaking what refers to it;
			// PolicyViolation is not retried: a retry would write it again.
			se.Msg = "checkpoint workspace: a workspace entry name (or symlink target) contains a secret value; " +
				"secrets may be written into files, never into file names"
		}
		if se.Type == ErrTypeTimeout || se.Type == ErrTypeOutputLimit {
			se.Type = ErrTypeSandboxLost
		}
		at.writeLog(ctx, se.Msg)
		return nil, se
	}
	at.writeLog(ctx, "")

	return &StepResult{
		Output:       output,
		CheckpointID: string(cp.CheckpointID),
		Attempt:      number,
		OutputBytes:  len(res.Stdout),
		ImageDigest:  exe.ImageDigest,
	}, nil
}

// toolEnv is the agentflow environment every tool exec gets.
func toolEnv(req StepRequest, number int32, gpuIgnored bool) map[string]string {
	env := map[string]string{
		"AGENTFLOW_AGENT_ID": req.AgentID,
		"AGENTFLOW_STEP_ID":  req.StepID,
		"AGENTFLOW_ATTEMPT":  strconv.Itoa(int(number)),
	}
	if gpuIgnored {
		env[EnvGPUIgnored] = "1"
	}
	return env
}

func validateRequest(req StepRequest) error {
	switch {
	case req.AgentID == "" || req.RunID == "" || req.StepID == "":
		return failf(ErrTypeInvalidInput, "step request needs agent_id, run_id and step_id")
	case req.Image == "":
		return failf(ErrTypeInvalidInput, "step %s has no image (tools are resolved to digests at submission)", req.StepID)
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

func stepTimeout(req StepRequest) time.Duration {
	if req.Timeout > 0 {
		return req.Timeout
	}
	return DefaultStepTimeout
}

// resolveSecrets resolves exactly the step's secrets. A secret that cannot
// be resolved is InvalidInput, one the worker's policy refuses is
// PolicyViolation (neither is retried): the error names the secret and its
// source, never a value.
func (a *Activities) resolveSecrets(ctx context.Context, sources map[string]string) (map[string]string, error) {
	if len(sources) == 0 {
		return map[string]string{}, nil
	}
	if a.opts.Secrets == nil {
		return nil, failf(ErrTypeInvalidInput, "step needs %d secret(s) but this worker has no secret resolver", len(sources))
	}
	values, err := secrets.Resolve(ctx, a.opts.Secrets, sources)
	if err != nil {
		typ := ErrTypeInvalidInput
		if errors.Is(err, secrets.ErrNotAllowed) {
			// The worker's secret policy refused it: PolicyViolation, never
			// retried; the operator's log says which source and flag.
			typ = ErrTypePolicy
			a.log.Warn("secret source refused by the worker's policy", "error", err.Error())
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

func (at *attempt) provision(ctx context.Context, env map[string]string) (*exechost.Execution, error) {
	req := at.req
	labels := map[string]string{
		LabelAgentID: truncate(req.AgentID, 256),
		LabelRunID:   truncate(req.RunID, 256),
		LabelStepID:  truncate(req.StepID, 256),
		LabelAttempt: strconv.Itoa(int(at.number)),
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
	start := time.Now()
	exe, err := at.a.opts.Host.Provision(ctx, exechost.ProvisionRequest{
		ExecutionID: at.id,
		Image:       req.Image,
		Workspace:   ws,
		Resources: exechost.ResourceLimits{
			NanoCPUs:       r.NanoCPUs,
			MemoryBytes:    r.MemoryBytes,
			DiskBytes:      r.DiskBytes,
			Pids:           r.Pids,
			Runtime:        stepTimeout(req) + at.a.opts.RuntimeMargin,
			MaxOutputBytes: r.MaxOutputBytes,
			GPUs:           r.GPUs,
		},
		Network: exechost.NetworkNone,
		Env:     env,
		Labels:  labels,
	})
	at.a.opts.Metrics.ObservePhase(phase, time.Since(start), err)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		typ := hostErrorType(err)
		if typ == ErrTypeTimeout || typ == ErrTypeOutputLimit {
			typ = ErrTypeSandboxLost // provisioning runs no tool
		}
		se := failf(typ, "provision sandbox for step %s: %s", req.StepID, at.scrub.String(err.Error()))
		se.Details.Attempt = at.number
		at.writeLog(ctx, se.Msg)
		return nil, se
	}
	return exe, nil
}

// execFailure classifies an Exec that returned an error (the sandbox is
// gone: the host destroys it on timeout, output overflow and abort).
func (at *attempt) execFailure(err error, res *exechost.ExecResult) *stepError {
	typ := hostErrorType(err)
	se := &stepError{Type: typ, Details: at.details(res)}
	switch typ {
	case ErrTypeTimeout:
		se.Msg = fmt.Sprintf("tool did not finish within the step timeout of %s; the sandbox was destroyed", stepTimeout(at.req))
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

func (at *attempt) details(res *exechost.ExecResult) StepFailureDetails {
	d := StepFailureDetails{Attempt: at.number, ExitCode: -1}
	if res != nil {
		d.ExitCode = res.ExitCode
		d.StderrTail = tail(string(at.scrub.Bytes(res.Stderr)), at.a.opts.StderrTail)
	}
	return d
}

func (at *attempt) checkpoint(ctx context.Context) (*exechost.Checkpoint, error) {
	start := time.Now()
	cp, err := at.a.opts.Host.Checkpoint(ctx, at.id, exechost.CheckpointRequest{
		Reason: fmt.Sprintf("step %s attempt %d", at.req.StepID, at.number),
		// Secrets the tool wrote into /workspace are stored as '*'s of the
		// same length, so no dependent step restores them.
		Redact: at.redact,
	})
	at.a.opts.Metrics.ObservePhase(metrics.PhaseCheckpoint, time.Since(start), err)
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
	start := time.Now()
	err := at.a.opts.Host.Terminate(cctx, at.id)
	at.a.opts.Metrics.ObservePhase(metrics.PhaseTerminate, time.Since(start), err)
	if provisioned {
		at.a.opts.Metrics.SandboxDown()
	}
	if err != nil {
		// The reaper removes what is left (the sandbox also expires on its
		// own deadline); the attempt's outcome stands.
		at.log.WarnContext(ctx, "terminate sandbox", "error", at.scrub.String(err.Error()))
	}
}

// writeLog stores the attempt's stderr and, when the attempt failed
// (failMsg != ""), its stdout and the failure. Scrubbed; best effort: a log
// store problem never changes the attempt's outcome.
func (at *attempt) writeLog(ctx context.Context, failMsg string) {
	if at.a.opts.Logs == nil {
		return
	}
	var buf bytes.Buffer
	buf.Write(at.scrub.Bytes(at.stderr))
	if failMsg != "" {
		if len(at.stdout) > 0 {
			if buf.Len() > 0 && !bytes.HasSuffix(buf.Bytes(), []byte("\n")) {
				buf.WriteByte('\n')
			}
			buf.WriteString("--- stdout ---\n")
			buf.Write(at.scrub.Bytes(at.stdout))
		}
		if buf.Len() > 0 && !bytes.HasSuffix(buf.Bytes(), []byte("\n")) {
			buf.WriteByte('\n')
		}
		fmt.Fprintf(&buf, "--- agentflow: attempt %d failed: %s\n", at.number, at.scrub.String(failMsg))
	}
	key := logstore.Key{AgentID: at.req.AgentID, RunID: at.req.RunID, StepID: at.req.StepID, Attempt: at.number}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), at.a.opts.CleanupTimeout)
	defer cancel()
	if err := at.a.opts.Logs.Write(cctx, key, buf.Bytes()); err != nil {
		at.log.WarnContext(ctx, "write step log", "error", err)
	}
}

// finish records the attempt's metrics and its log line.
func (at *attempt) finish(ctx context.Context, start time.Time, err error) {
	status := "success"
	var se *stepError
	switch {
	case err == nil:
	case errors.As(err, &se):
		status = se.Type
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		status = "canceled"
	default:
		status = ErrTypeSandboxLost
	}
	m := at.a.opts.Metrics
	tool := toolName(at.req)
	if m != nil {
		m.ToolInvocations.WithLabelValues(tool, status).Inc()
		m.StepDuration.WithLabelValues(tool, status).Observe(time.Since(start).Seconds())
		if at.number > 1 {
			m.StepRetries.WithLabelValues(tool).Inc()
		}
	}
	if err != nil {
		at.log.InfoContext(ctx, "step attempt failed", "status", status, "duration_ms", time.Since(start).Milliseconds(),
			"error", at.scrub.String(err.Error()))
		return
	}
	at.log.InfoContext(ctx, "step attempt succeeded", "duration_ms", time.Since(start).Milliseconds())
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
