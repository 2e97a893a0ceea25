package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/internal/spec"
)

// The attempt loop of a tool step (changeInfraRetries v1, SPEC §5): the
// workflow, not Temporal's RetryPolicy, decides whether a failed attempt is
// tried again, because two budgets apply and a RetryPolicy has one:
//
//   - a tool failure (ToolFailed, ToolTimeout, OutputLimit) counts against
//     the step's `retries`;
//   - an infrastructure failure (sandbox lost, worker lost, store or image
//     unavailable, any error that is not an ApplicationError) counts against
//     maxInfraFailures, whatever `retries` says, so a spec without `retries`
//     survives a dead worker;
//   - anything a retry cannot fix ends the step at once, and so does a
//     cancellation.

// maxInfraFailures is the infrastructure budget of one step: the step fails
// at the maxInfraFailures-th infrastructure failure.
const maxInfraFailures = 5

// MaxAttempts is the highest attempt number a tool step can reach: its
// `retries` tool failures and maxInfraFailures-1 infrastructure failures
// before the attempt that ends it (earlier versions, one budget of
// retries+1, stay below). Retention (internal/gc) derives the execution
// IDs of a run's attempts from it.
func MaxAttempts(ps *spec.PlanStep) int32 {
	return int32(max(ps.Retries, 0) + maxInfraFailures)
}

// backoff is an exponential delay: initial × factor^(n-1), capped at max.
type backoff struct {
	initial time.Duration
	factor  int64
	max     time.Duration
}

// after is the delay before the next attempt, after the n-th failure (n ≥ 1)
// counted against this budget.
func (b backoff) after(n int) time.Duration {
	d := b.initial
	for i := 1; i < n && d < b.max; i++ {
		d *= time.Duration(b.factor)
	}
	return min(d, b.max)
}

var (
	// toolBackoff is what the step's RetryPolicy used before
	// changeInfraRetries: a tool retry waits as it always did.
	toolBackoff = backoff{initial: time.Second, factor: 2, max: time.Minute}
	// infraBackoff spreads the infrastructure budget over about half a
	// minute of waiting (2+4+8+16 s), long enough for a daemon restart or a
	// store failover, short enough that an outage that does not end fails
	// the run within a minute or so.
	infraBackoff = backoff{initial: 2 * time.Second, factor: 2, max: 30 * time.Second}
)

// attemptActivityOptions are stepActivityOptions with Temporal retries off
// (one activity execution is one attempt) for attempt n; the Web UI lists
// every attempt as its own activity, so a retry's summary says which.
func attemptActivityOptions(ps *spec.PlanStep, n int32) workflow.ActivityOptions {
	opts := stepActivityOptions(ps)
	opts.RetryPolicy = &temporal.RetryPolicy{MaximumAttempts: 1}
	opts.Priority = stepPriority(ps, n)
	if n > 1 {
		opts.Summary = fmt.Sprintf("%s · attempt %d", opts.Summary, n)
	}
	return opts
}

// attemptFailure is one failed attempt, classified.
type attemptFailure struct {
	class      string // ClassTool, ClassInfrastructure, ClassPermanent; "" = canceled
	typ        string
	msg        string // the message, without the type
	worker     string
	checkpoint string
}

func (f attemptFailure) canceled() bool { return f.class == "" }

// stepError is how a step's error reads: "Type: message".
func (f attemptFailure) stepError() string { return f.typ + ": " + f.msg }

// classifyAttempt classifies the error of one RunStep execution.
func classifyAttempt(err error) attemptFailure {
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		return attemptFailure{typ: failure.Canceled, msg: "canceled"}
	}
	var f attemptFailure
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) {
		// The identity of the worker that last started the activity: the
		// only name a worker that died mid-attempt leaves behind.
		f.worker = actErr.Identity()
	}
	// A timeout first: Temporal may chain the last application failure
	// below it, but what ended the attempt is that the worker went silent.
	// Only Heartbeat and StartToClose are set on a step's activity (no
	// ScheduleTo* timeouts: a step waits for a worker as long as it takes).
	var timeoutErr *temporal.TimeoutError
	if errors.As(err, &timeoutErr) {
		f.class, f.typ = ClassInfrastructure, failure.WorkerLost
		what := timeoutErr.TimeoutType().String()
		// RunStep heartbeats its phase (provision, exec, checkpoint, …):
		// where the worker was when it went silent.
		// Its heartbeat also names the worker (the timeout's own identity
		// is empty on a real server); heartbeats of earlier workers carry
		// the phase only, and decode with worker left empty.
		var phase, worker string
		if timeoutErr.HasLastHeartbeatDetails() && timeoutErr.LastHeartbeatDetails(&phase, &worker) == nil {
			if phase != "" {
				what += ", last heartbeat in phase " + phase
			}
			if worker != "" {
				f.worker = worker
			}
		}
		f.msg = fmt.Sprintf("attempt timed out (%s): the worker died or stopped answering", what)
		return f
	}
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() == "" {
		// Nothing classified it (a panic, a server error): it says nothing
		// about the tool (failure.Kind's rule).
		f.class, f.typ = ClassInfrastructure, failure.SandboxLost
		f.msg = unwrapActivity(err).Error()
		return f
	}
	f.typ = appErr.Type()
	f.msg = appErr.Message()
	var details activities.StepFailureDetails
	if appErr.HasDetails() && appErr.Details(&details) == nil {
		f.checkpoint = details.CheckpointID
		if details.Worker != "" {
			f.worker = details.Worker
		}
	}
	switch {
	case appErr.NonRetryable() || !failure.Retryable(f.typ):
		f.class = ClassPermanent
	case failure.Infrastructure(f.typ):
		f.class = ClassInfrastructure
	default:
		f.class = ClassTool
	}
	return f
}

// unwrapActivity drops the ActivityError wrapper, whose message repeats
// the activity's scheduling IDs.
func unwrapActivity(err error) error {
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) {
		if cause := errors.Unwrap(actErr); cause != nil {
			return cause
		}
	}
	return err
}

// maxAttemptError bounds the error kept per attempt: the history holds up
// to retries+maxInfraFailures records, and the step's own error already
// carries the full last message.
const maxAttemptError = 200

// shortError is the first line of msg, at most maxAttemptError bytes (cut
// on a rune boundary).
func shortError(msg string) string {
	line, _, _ := strings.Cut(msg, "\n")
	if len(line) <= maxAttemptError {
		return line
	}
	cut := maxAttemptError
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return line[:cut] + "…"
}

// runAttempts runs a tool step to its end: attempts until one succeeds,
// a budget is spent, a failure is permanent, or the run is canceled.
func (r *runner) runAttempts(ctx workflow.Context, st *stepState, req activities.StepRequest) {
	retries := max(st.plan.Retries, 0)
	var toolFailures, infraFailures int
	var checkpoint string // the latest failed attempt's checkpoint
	for n := int32(1); ; n++ {
		req.Attempt = n
		st.rec.Attempts = n
		st.rec.AttemptHistory = append(st.rec.AttemptHistory,
			AttemptRecord{Attempt: n, Status: AttemptRunning, StartedAt: workflow.Now(ctx)})
		rec := &st.rec.AttemptHistory[len(st.rec.AttemptHistory)-1]

		actx := workflow.WithActivityOptions(ctx, routeGPU(ctx, st.plan, attemptActivityOptions(st.plan, n)))
		var res activities.StepResult
		err := workflow.ExecuteActivity(actx, acts.RunStep, req).Get(actx, &res)
		now := workflow.Now(ctx)
		rec.FinishedAt = &now
		if err == nil {
			rec.Status, rec.Worker, rec.AdoptedFrom = AttemptSuccess, res.Worker, res.AdoptedFrom
			st.rec.Output = res.Output
			st.rec.CheckpointID = res.CheckpointID
			r.s.finish(st, StepSuccess, "", "", now)
			r.logger.Info("step succeeded", "step_id", st.rec.ID, "attempts", n, "adopted_from", res.AdoptedFrom)
			return
		}

		f := classifyAttempt(err)
		rec.Worker = f.worker
		if f.canceled() {
			rec.Status = AttemptCanceled
			r.endAttempts(st, StepCanceled, "", checkpoint, now)
			return
		}
		rec.Status, rec.Class, rec.Type, rec.Error = AttemptFailed, f.class, f.typ, shortError(f.msg)
		if f.checkpoint != "" {
			checkpoint = f.checkpoint
		}
		var delay time.Duration
		switch f.class {
		case ClassPermanent:
			r.endAttempts(st, StepFailed, f.stepError(), checkpoint, now)
			return
		case ClassTool:
			toolFailures++
			if toolFailures > retries {
				r.endAttempts(st, StepFailed, f.stepError(), checkpoint, now)
				return
			}
			delay = toolBackoff.after(toolFailures)
		case ClassInfrastructure:
			infraFailures++
			if infraFailures >= maxInfraFailures {
				r.endAttempts(st, StepFailed,
					fmt.Sprintf("%d infrastructure failures; last: %s", infraFailures, f.stepError()), checkpoint, now)
				return
			}
			delay = infraBackoff.after(infraFailures)
		}
		r.logger.Warn("step attempt failed; retrying", "step_id", st.rec.ID, "attempt", n,
			"class", f.class, "type", f.typ, "worker", f.worker, "backoff", delay)
		// A run cancel during the wait cancels the timer: the step ends
		// canceled without another attempt.
		if err := workflow.NewTimer(ctx, delay).Get(ctx, nil); err != nil {
			r.endAttempts(st, StepCanceled, "", checkpoint, workflow.Now(ctx))
			return
		}
	}
}

// endAttempts ends a step that did not succeed.
func (r *runner) endAttempts(st *stepState, status, errMsg, checkpoint string, now time.Time) {
	st.rec.CheckpointID = checkpoint
	r.s.finish(st, status, "", errMsg, now)
	r.logger.Warn("step ended", "step_id", st.rec.ID, "step_status", status, "attempts", st.rec.Attempts, "error", errMsg)
}
