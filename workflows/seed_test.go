package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/spec"
)

func loadSeed(t *testing.T, name string) *spec.Plan {
	t.Helper()
	p, err := spec.LoadFile("../specs/" + name)
	require.NoError(t, err)
	return p
}

func TestSeedComplaintHandler(t *testing.T) {
	tests := []struct {
		name       string
		issueType  string
		validate   stepFn
		wantStatus string
		wantSteps  map[string]string // step → status[/reason]
		wantOutput any
	}{
		{
			name: "billing error compensated", issueType: "billing_error",
			validate:   succeed(map[string]any{"compensation_plan": "refund 42"}),
			wantStatus: RunSucceeded,
			wantSteps: map[string]string{
				"validate_billing": StepSuccess, "send_compensation": StepSuccess,
				"escalate_to_human": StepSkipped + "/" + ReasonConditionFalse,
			},
			wantOutput: StepSuccess,
		},
		{
			// escalate_to_human runs because its `if` looks at the failure;
			// the run is still FAILED (validate_billing has no
			// continue_on_error), and the seed's output expression yields
			// "skipped": send_compensation's status is a truthy string.
			name: "billing validation fails and escalates", issueType: "billing_error",
			validate:   fail(activities.ErrTypeToolFailed, "finance api 500"),
			wantStatus: RunFailed,
			wantSteps: map[string]string{
				"validate_billing": StepFailed, "escalate_to_human": StepSuccess,
				"send_compensation": StepSkipped + "/" + ReasonConditionFalse,
			},
			wantOutput: StepSkipped,
		},
		{
			name: "not a billing issue", issueType: "question",
			wantStatus: RunSucceeded,
			wantSteps: map[string]string{
				"validate_billing":  StepSkipped + "/" + ReasonConditionFalse,
				"escalate_to_human": StepSkipped + "/" + ReasonConditionFalse,
				"send_compensation": StepSkipped + "/" + ReasonConditionFalse,
			},
			wantOutput: StepSkipped,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := loadSeed(t, "complaint-handler.yaml")
			h := newHarness(t)
			h.onStep("fetch_email", succeed(map[string]any{"body": "my bill is wrong", "sender": "user@corp.com"}))
			h.onStep("extract_entities", succeed(map[string]any{"customer_id": "C-7890", "amount": 42, "issue_type": tc.issueType}))
			if tc.validate != nil {
				h.onStep("validate_billing", tc.validate)
			}
			h.onStep("escalate_to_human", succeed(map[string]any{"ticket": "JIRA-1"})).Maybe()
			h.onStep("send_compensation", succeed(map[string]any{"sent": true})).Maybe()

			o := h.run(Input{Plan: *p, Inputs: map[string]any{"email_id": "m-1"}})
			require.Equal(t, tc.wantStatus, o.result.Status)
			require.Equal(t, tc.wantOutput, o.result.Outputs["resolution_status"])
			s := o.steps()
			for id, want := range tc.wantSteps {
				got := s[id].Status
				if s[id].Reason != "" {
					got += "/" + s[id].Reason
				}
				require.Equal(t, want, got, id)
			}
			require.Equal(t, "5/5", o.status.Progress)
			require.Equal(t, map[string]any{"email_id": "m-1"}, h.reqs("fetch_email")[0].Input)
			require.Equal(t, 30*time.Second, h.reqs("fetch_email")[0].Timeout)
			if tc.validate != nil {
				require.Equal(t, map[string]any{"customer_id": "C-7890", "amount": float64(42)}, h.reqs("validate_billing")[0].Input)
				// validate_billing depends on extract_entities only through
				// its expressions; that still layers the workspace.
				require.Equal(t, []string{"cp-extract_entities"}, h.reqs("validate_billing")[0].Checkpoints)
			}
		})
	}
}

func TestSeedDailyTechNews(t *testing.T) {
	p := loadSeed(t, "daily-tech-news.yaml")
	h := newHarness(t)
	start := time.Date(2024, 6, 15, 9, 0, 0, 0, time.UTC)
	h.env.SetStartTime(start)
	h.onStep("fetch_rss", succeed(map[string]any{"items": []any{
		map[string]any{"content": "one"}, map[string]any{"content": "two"},
	}}))
	h.onStep("summarize_news", succeed(map[string]any{"summary": "three insights"}))
	h.onStep("render_md", succeed(map[string]any{"markdown": "# News"}))
	h.onStep("post_to_slack", func(ctx context.Context, req activities.StepRequest) (*activities.StepResult, error) {
		return succeed(map[string]any{"ok": true})(ctx, req)
	})

	o := h.run(Input{Plan: *p})
	require.NoError(t, o.err)
	require.Equal(t, map[string]any{"summary_length": float64(len("three insights")), "posted_to_slack": true}, o.result.Outputs)

	require.Equal(t, "one\n\ntwo", h.reqs("summarize_news")[0].Input["texts"])
	render := h.reqs("render_md")[0]
	require.Equal(t, "Daily Tech News Summary - 2024-06-15", render.Input["title"], "now is workflow time")
	post := h.reqs("post_to_slack")[0]
	require.Equal(t, "{{ .secrets.slack_webhook_url }}", post.Input["webhook_url"], "secrets stay placeholders in history")
	require.Equal(t, map[string]string{"slack_webhook_url": "vault://prod/slack/webhook"}, post.SecretSources)
	require.Contains(t, post.Input["blocks"], `"text": "# News"`)
	require.Empty(t, h.reqs("fetch_rss")[0].SecretSources, "a step sees only the secrets it references")
}

// TestLiveDailyTechNewsEgress: the live spec's egress lists reach the
// activity as written, header values as placeholders (never a value in
// history), and the header's secret among the step's secret sources.
func TestLiveDailyTechNewsEgress(t *testing.T) {
	p := loadSeed(t, "daily-tech-news.live.yaml")
	h := newHarness(t)
	h.onStep("fetch_rss", succeed(map[string]any{"items": []any{map[string]any{"content": "one"}}}))
	h.onStep("summarize_news", succeed(map[string]any{"summary": "s"}))
	h.onStep("render_md", succeed(map[string]any{"markdown": "# m"}))
	h.onStep("post_to_slack", succeed(map[string]any{"ok": true}))
	o := h.run(Input{Plan: *p})
	require.NoError(t, o.err)

	require.Equal(t, []spec.EgressRule{{Host: "techcrunch.com", Port: 443}}, h.reqs("fetch_rss")[0].Egress)
	require.Empty(t, h.reqs("fetch_rss")[0].SecretSources)
	sum := h.reqs("summarize_news")[0]
	require.Equal(t, []spec.EgressRule{{Host: "api.openai.com", Port: 443,
		Headers: map[string]string{"Authorization": "Bearer {{ .secrets.openai_api_key }}"}}}, sum.Egress)
	require.Equal(t, map[string]string{"openai_api_key": "vault://prod/openai/api_key"}, sum.SecretSources)
	require.Equal(t, int64(64<<20), sum.Resources.MaxEgressBytes, "the default budget")
	require.Empty(t, h.reqs("render_md")[0].Egress, "a step without egress has none")
	require.Zero(t, h.reqs("render_md")[0].Resources.MaxEgressBytes)
	require.Equal(t, map[string]string{"slack_bot_token": "vault://prod/slack/bot_token"}, h.reqs("post_to_slack")[0].SecretSources)
}

// TestStatusShowsEgress: the inspect document lists each step's egress
// (hosts and header names, never the header templates' secrets).
func TestStatusShowsEgress(t *testing.T) {
	p := loadSeed(t, "daily-tech-news.live.yaml")
	s := newRunState(p)
	require.Equal(t, []string{"techcrunch.com:443"}, s.byID["fetch_rss"].rec.Egress)
	require.Equal(t, []string{"api.openai.com:443 +Authorization"}, s.byID["summarize_news"].rec.Egress)
	require.Empty(t, s.byID["render_md"].rec.Egress)
}

// TestStepPriorities: a run that has started goes first — its later steps
// and retries before any first step, RunFinished before both.
func TestStepPriorities(t *testing.T) {
	root := &spec.PlanStep{ID: "a"}
	dep := &spec.PlanStep{ID: "b", DependsOn: []string{"a"}}
	require.Equal(t, priorityRoot, stepPriority(root, 1).PriorityKey)
	require.Equal(t, priorityStarted, stepPriority(root, 2).PriorityKey, "a retry of a first step")
	require.Equal(t, priorityStarted, stepPriority(dep, 1).PriorityKey)
	require.Less(t, priorityFinish, priorityStarted)
	require.Less(t, priorityStarted, priorityRoot)
	require.Equal(t, priorityFinish, runFinishedOptions.Priority.PriorityKey)
	require.Equal(t, priorityStarted, attemptActivityOptions(dep, 1).Priority.PriorityKey)
	require.Equal(t, priorityRoot, attemptActivityOptions(root, 1).Priority.PriorityKey)
}
