package expr

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

var seedNow = time.Date(2024, 6, 15, 16, 0, 0, 0, time.UTC)

// complaintEnv is the state of the seed complaint-handler run after its
// billing branch has finished.
func complaintEnv() *Env {
	return &Env{
		Now:    seedNow,
		Inputs: map[string]any{"email_id": "msg-20240615-001"},
		Steps: map[string]StepView{
			"fetch_email": {Status: "success", Output: map[string]any{
				"body":   "I was charged twice for order #4411. Please refund.",
				"sender": "Alice.Wong@Corp.com",
			}},
			"extract_entities": {Status: "success", Output: map[string]any{
				"customer_id": "C-1029", "amount": 49.99, "issue_type": "billing_error",
			}},
			"validate_billing":  {Status: "failed"},
			"send_compensation": {Status: "skipped"},
			"escalate_to_human": {Status: "success", Output: map[string]any{"ticket": "T-7"}},
		},
	}
}

func newsEnv() *Env {
	items := []any{}
	for _, c := range []string{"OpenAI ships a model.", "Rust 2.0 announced.", "Go 1.26 released."} {
		items = append(items, map[string]any{"title": c[:4], "link": "https://techcrunch.com/x", "content": c, "published": "2024-06-15T08:00:00Z"})
	}
	return &Env{
		Now:    seedNow,
		Inputs: map[string]any{},
		Steps: map[string]StepView{
			"fetch_rss":      {Status: "success", Output: map[string]any{"items": items}},
			"summarize_news": {Status: "success", Output: map[string]any{"summary": "- [AI]: models.\n- [Rust]: 2.0.\n- [Go]: 1.26."}},
			"render_md":      {Status: "success", Output: map[string]any{"markdown": "# Daily\n- [AI]: models."}},
			"post_to_slack":  {Status: "success", Output: map[string]any{"ok": true}},
		},
	}
}

// The seed strings exactly as they appear in the seed's YAML (double-quoted
// scalars, so YAML itself turns \n and \" into a newline and a quote).
const seedYAML = `
email_id: "{{ .inputs.email_id }}"
body: "{{ .steps.fetch_email.output.body }}"
sender: "{{ .steps.fetch_email.output.sender }}"
customer_id: "{{ .steps.extract_entities.output.customer_id }}"
amount: "{{ .steps.extract_entities.output.amount }}"
billing_if: "{{ .steps.extract_entities.output.issue_type == 'billing_error' }}"
failed_if: "{{ .steps.validate_billing.status == 'failed' }}"
success_if: "{{ .steps.validate_billing.status == 'success' }}"
plan: "{{ .steps.validate_billing.output.compensation_plan }}"
resolution: "{{ .steps.send_compensation.status or .steps.escalate_to_human.status }}"
normalised_sender: "{{ .steps.fetch_email.output.sender | lower | replace(\"@corp.com\", \"@company.com\") }}"
texts: "{{ .steps.fetch_rss.output.items | map('content') | join('\n\n') }}"
title: "Daily Tech News Summary - {{ now | date \"2006-01-02\" }}"
content: "{{ .steps.summarize_news.output.summary }}"
summary_length: "{{ len(.steps.summarize_news.output.summary) }}"
posted: "{{ .steps.post_to_slack.status == 'success' }}"
webhook: "{{ .secrets.slack_webhook_url }}"
api_key: "{{ .secrets.finance_api_key }}"
blocks: |
  [ { "type": "section", "text": { "type": "mrkdwn", "text": "{{ .steps.render_md.output.markdown }}" } } ]
`

func TestSeedExpressions(t *testing.T) {
	var src map[string]string
	require.NoError(t, yaml.Unmarshal([]byte(seedYAML), &src))

	tests := []struct {
		key  string
		env  *Env
		want any
	}{
		{"email_id", complaintEnv(), "msg-20240615-001"},
		{"body", complaintEnv(), "I was charged twice for order #4411. Please refund."},
		{"sender", complaintEnv(), "Alice.Wong@Corp.com"},
		{"customer_id", complaintEnv(), "C-1029"},
		{"amount", complaintEnv(), 49.99},
		{"billing_if", complaintEnv(), true},
		{"failed_if", complaintEnv(), true},
		{"success_if", complaintEnv(), false},
		{"plan", complaintEnv(), nil}, // failed step: no output, missing path is null
		{"resolution", complaintEnv(), "skipped"},
		{"normalised_sender", complaintEnv(), "alice.wong@company.com"},
		{"texts", newsEnv(), "OpenAI ships a model.\n\nRust 2.0 announced.\n\nGo 1.26 released."},
		{"title", newsEnv(), "Daily Tech News Summary - 2024-06-15"},
		{"content", newsEnv(), "- [AI]: models.\n- [Rust]: 2.0.\n- [Go]: 1.26."},
		{"summary_length", newsEnv(), 44.0},
		{"posted", newsEnv(), true},
		{"blocks", newsEnv(), `[ { "type": "section", "text": { "type": "mrkdwn", "text": "# Daily` + "\n" + `- [AI]: models." } } ]` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			s, ok := src[tt.key]
			require.True(t, ok)
			tpl, err := Parse(s)
			require.NoError(t, err)
			got, err := tpl.Eval(tt.env)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}

	t.Run("resolution without compensation", func(t *testing.T) {
		env := complaintEnv()
		env.Steps["send_compensation"] = StepView{Status: "success"}
		tpl, err := Parse(src["resolution"])
		require.NoError(t, err)
		got, err := tpl.Eval(env)
		require.NoError(t, err)
		require.Equal(t, "success", got)
	})

	t.Run("the same expressions written with YAML single quotes", func(t *testing.T) {
		// In a single-quoted scalar YAML keeps \n as two characters; the
		// expression language decodes the escape itself.
		var m map[string]string
		require.NoError(t, yaml.Unmarshal([]byte(`texts: '{{ .steps.fetch_rss.output.items | map(''content'') | join("\n\n") }}'`), &m))
		tpl, err := Parse(m["texts"])
		require.NoError(t, err)
		got, err := tpl.Eval(newsEnv())
		require.NoError(t, err)
		require.Equal(t, "OpenAI ships a model.\n\nRust 2.0 announced.\n\nGo 1.26 released.", got)
	})

	for _, key := range []string{"webhook", "api_key"} {
		t.Run(key+" is a secret placeholder", func(t *testing.T) {
			tpl, err := Parse(src[key])
			require.NoError(t, err)
			name, ok := tpl.SecretName()
			require.True(t, ok)
			require.Contains(t, []string{"slack_webhook_url", "finance_api_key"}, name)
			_, err = tpl.Eval(newsEnv())
			require.ErrorIs(t, err, ErrSecretNotAvailable)
		})
	}
}

func TestSeedConditions(t *testing.T) {
	tests := []struct {
		name string
		src  string
		env  *Env
		want bool
	}{
		{"billing branch taken", "{{ .steps.extract_entities.output.issue_type == 'billing_error' }}", complaintEnv(), true},
		{"escalate when billing failed", "{{ .steps.validate_billing.status == 'failed' }}", complaintEnv(), true},
		{"compensate when billing ok", "{{ .steps.validate_billing.status == 'success' }}", complaintEnv(), false},
		{"step not run yet", "{{ .steps.nope.status == 'success' }}", complaintEnv(), false},
		{"missing path is falsy", "{{ .steps.extract_entities.output.not_there }}", complaintEnv(), false},
		{"missing path compared is false", "{{ .steps.extract_entities.output.not_there > 3 }}", complaintEnv(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := Parse(tt.src)
			require.NoError(t, err)
			got, err := tpl.EvalBool(tt.env)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
