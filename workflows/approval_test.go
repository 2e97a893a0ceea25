package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func approvalPlan(timeout time.Duration) Input {
	return Input{Plan: testPlan(tool("draft"), approvalStep("review", timeout, "draft"), tool("publish", "review"))}
}

func (h *harness) signalAt(d time.Duration, dec ApprovalDecision) {
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(ApprovalSignal, dec) }, d)
}

func TestApprovalApproved(t *testing.T) {
	h := newHarness(t)
	h.onStep("draft", succeed(map[string]any{"text": "hi"}))
	h.onStep("publish", succeed(map[string]any{}))
	var waiting *Status
	h.env.RegisterDelayedCallback(func() { waiting = h.query() }, 30*time.Minute)
	h.signalAt(time.Hour, ApprovalDecision{Step: "review", Approve: true, By: "alice", Comment: "lgtm"})

	o := h.run(approvalPlan(24 * time.Hour))
	require.NoError(t, o.err)
	require.Equal(t, RunRunning, waiting.Status)
	require.Equal(t, "review", waiting.CurrentStep)
	require.Equal(t, StepWaitingApproval, waiting.StepHistory[1].Status)

	rec := o.steps()["review"]
	require.Equal(t, StepSuccess, rec.Status)
	require.Equal(t, "alice", rec.ApprovedBy)
	require.Equal(t, "lgtm", rec.Comment)
	require.Equal(t, map[string]any{"approved": true, "by": "alice", "comment": "lgtm"}, rec.Output)
	require.Equal(t, int64(time.Hour/time.Millisecond), rec.DurationMS)
	require.Equal(t, []string{"cp-draft"}, h.reqs("publish")[0].Checkpoints,
		"approval steps pass their upstream workspace through")
}

func TestApprovalRejected(t *testing.T) {
	h := newHarness(t)
	h.onStep("draft", succeed(map[string]any{}))
	h.signalAt(time.Hour, ApprovalDecision{Step: "review", Approve: false, By: "bob", Comment: "too expensive"})

	o := h.run(approvalPlan(24 * time.Hour))
	require.Equal(t, ErrTypeAgentFailed, o.errType())
	s := o.steps()
	require.Equal(t, StepFailed, s["review"].Status)
	require.Equal(t, "rejected by bob: too expensive", s["review"].Error)
	require.Equal(t, StepSkipped, s["publish"].Status)
	require.Equal(t, ReasonUpstreamFailed, s["publish"].Reason)
	require.Empty(t, h.reqs("publish"))
}

func TestApprovalTimeout(t *testing.T) {
	h := newHarness(t)
	h.onStep("draft", succeed(map[string]any{}))
	o := h.run(approvalPlan(2 * time.Hour))
	require.Equal(t, ErrTypeAgentFailed, o.errType())
	rec := o.steps()["review"]
	require.Equal(t, StepFailed, rec.Status)
	require.Equal(t, "approval timed out after 2h0m0s", rec.Error)
	require.Equal(t, int64(2*time.Hour/time.Millisecond), rec.DurationMS)
}

func TestApprovalSignalBufferedAndStrayIgnored(t *testing.T) {
	h := newHarness(t)
	// draft runs for an hour; the decision arrives while it is still running.
	h.onStep("draft", succeed(map[string]any{})).After(time.Hour)
	h.onStep("publish", succeed(map[string]any{}))
	h.signalAt(time.Minute, ApprovalDecision{Step: "nope", Approve: false})
	h.signalAt(2*time.Minute, ApprovalDecision{Step: "draft", Approve: false})
	h.signalAt(3*time.Minute, ApprovalDecision{Step: "review", Approve: true, By: "early"})

	o := h.run(approvalPlan(0)) // no timeout: waits forever
	require.NoError(t, o.err)
	s := o.steps()
	require.Equal(t, StepSuccess, s["draft"].Status)
	require.Equal(t, StepSuccess, s["review"].Status)
	require.Equal(t, "early", s["review"].ApprovedBy)
	require.Zero(t, s["review"].DurationMS, "the buffered decision applies as soon as the step waits")
	require.Equal(t, StepSuccess, s["publish"].Status)
}

func TestApprovalFirstDecisionWins(t *testing.T) {
	h := newHarness(t)
	// Both decisions arrive while draft still runs, so both are buffered.
	h.onStep("draft", succeed(map[string]any{})).After(3 * time.Hour)
	h.signalAt(time.Hour, ApprovalDecision{Step: "review", Approve: false, By: "bob"})
	h.signalAt(2*time.Hour, ApprovalDecision{Step: "review", Approve: true, By: "carol"})
	o := h.run(approvalPlan(24 * time.Hour))
	require.Equal(t, ErrTypeAgentFailed, o.errType())
	require.Equal(t, "rejected by bob", o.steps()["review"].Error)
}
