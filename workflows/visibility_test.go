package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/failure"
	"github.com/agentflow/agentflow/internal/spec"
)

func TestSearchAttributeUpserts(t *testing.T) {
	tests := []struct {
		name      string
		atStart   []temporal.SearchAttributeUpdate
		fails     bool
		wantFirst map[string]string // keys of the first upsert
		want      []string          // AgentStatus after each upsert
	}{
		{
			name: "all set by the client",
			atStart: []temporal.SearchAttributeUpdate{
				saAgentName.ValueSet("agent-1"), saSpec.ValueSet("test-agent"), saStatus.ValueSet(RunPending),
			},
			wantFirst: map[string]string{SearchAttrStatus: RunRunning},
			want:      []string{RunRunning, RunSucceeded},
		},
		{
			name: "failed run",
			atStart: []temporal.SearchAttributeUpdate{
				saAgentName.ValueSet("agent-1"), saSpec.ValueSet("test-agent"), saStatus.ValueSet(RunPending),
			},
			fails: true,
			want:  []string{RunRunning, RunFailed},
		},
		{
			name:      "only the name set: the rest is filled in",
			atStart:   []temporal.SearchAttributeUpdate{saAgentName.ValueSet("agent-1")},
			wantFirst: map[string]string{SearchAttrSpec: "test-agent", SearchAttrStatus: RunPending},
			want:      []string{RunPending, RunRunning, RunSucceeded},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			require.NoError(t, h.env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(tc.atStart...)))
			var upserts []temporal.SearchAttributes
			h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
				upserts = append(upserts, args.Get(0).(temporal.SearchAttributes))
			}).Return(nil)
			if tc.fails {
				h.onStep("a", fail(activities.ErrTypePolicy, "no"))
			} else {
				h.onStep("a", succeed(map[string]any{}))
			}
			h.run(Input{Plan: testPlan(tool("a"))})

			var got []string
			for _, u := range upserts {
				v, ok := u.GetKeyword(saStatus)
				require.True(t, ok)
				got = append(got, v)
			}
			require.Equal(t, tc.want, got)
			for k, v := range tc.wantFirst {
				got, ok := upserts[0].GetKeyword(temporal.NewSearchAttributeKeyKeyword(k))
				require.True(t, ok, k)
				require.Equal(t, v, got, k)
			}
		})
	}
}

func TestNoSearchAttributeUpsertsWhenNotRegistered(t *testing.T) {
	h := newHarness(t)
	h.env.OnUpsertTypedSearchAttributes(mock.Anything).Return(nil).Never()
	h.onStep("a", succeed(map[string]any{}))
	o := h.run(Input{Plan: testPlan(tool("a"))})
	require.NoError(t, o.err)
}

func TestMemo(t *testing.T) {
	t.Run("filled in when the starter did not set it", func(t *testing.T) {
		h := newHarness(t)
		var memo map[string]any
		h.env.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) {
			memo = args.Get(0).(map[string]any)
		}).Return(nil).Once()
		h.onStep("a", succeed(map[string]any{}))
		h.run(Input{Plan: testPlan(tool("a"))})
		require.Equal(t, map[string]any{MemoSpecName: "test-agent", MemoSpecVersion: "1.0.0"}, memo)
	})
	t.Run("left alone when set at start", func(t *testing.T) {
		h := newHarness(t)
		require.NoError(t, h.env.SetMemoOnStart(map[string]any{MemoSpecName: "test-agent", MemoSpecVersion: "1.0.0"}))
		h.env.OnUpsertMemo(mock.Anything).Return(nil).Never()
		h.onStep("a", succeed(map[string]any{}))
		h.run(Input{Plan: testPlan(tool("a"))})
	})
}

func TestActivityOptions(t *testing.T) {
	st := tool("summarize")
	st.Retries = 3
	opts := stepActivityOptions(&st)
	require.Equal(t, "summarize · summarize-tool:1.0", opts.Summary)
	// The same budget RunStep derives its deadlines from; for the 30 s
	// test timeout the numbers the recorded histories carry.
	require.Equal(t, activities.BudgetFor(st.Timeout).StartToClose, opts.StartToCloseTimeout)
	require.Equal(t, 150*time.Second, opts.StartToCloseTimeout)
	require.Equal(t, activities.BudgetFor(st.Timeout).Heartbeat, opts.HeartbeatTimeout)
	require.Equal(t, 20*time.Second, opts.HeartbeatTimeout)
	require.True(t, opts.WaitForCancellation)
	require.EqualValues(t, 4, opts.RetryPolicy.MaximumAttempts)
	require.EqualValues(t, 2, opts.RetryPolicy.BackoffCoefficient)
	require.ElementsMatch(t, failure.NonRetryableTypes(), opts.RetryPolicy.NonRetryableErrorTypes)
	require.Contains(t, opts.RetryPolicy.NonRetryableErrorTypes, activities.ErrTypePolicy)

	img := spec.PlanStep{ID: "raw", Image: testImage, Timeout: spec.DefaultTimeout}
	opts = stepActivityOptions(&img)
	require.Equal(t, "raw · "+testImage, opts.Summary)
	require.Equal(t, spec.DefaultTimeout+activities.BudgetMargin, opts.StartToCloseTimeout)
	require.EqualValues(t, 1, opts.RetryPolicy.MaximumAttempts)

	// The current branch: the same budget, one execution per attempt.
	aopts := attemptActivityOptions(&st, 1)
	require.Equal(t, "summarize · summarize-tool:1.0", aopts.Summary)
	require.Equal(t, "summarize · summarize-tool:1.0 · attempt 3", attemptActivityOptions(&st, 3).Summary)
	require.Equal(t, activities.BudgetFor(st.Timeout).StartToClose, aopts.StartToCloseTimeout)
	require.Equal(t, activities.BudgetFor(st.Timeout).Heartbeat, aopts.HeartbeatTimeout)
	require.True(t, aopts.WaitForCancellation)
	require.EqualValues(t, 1, aopts.RetryPolicy.MaximumAttempts, "the workflow retries, not Temporal")
}
