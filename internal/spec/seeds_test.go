package spec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSpecsDirValidates loads every spec shipped in specs/.
func TestSpecsDirValidates(t *testing.T) {
	files, err := filepath.Glob("../../specs/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p, err := LoadFile(f)
			require.NoError(t, err)
			require.NotEmpty(t, p.Steps)
			// The Plan travels through Temporal history as JSON: it must
			// survive the round trip unchanged.
			b, err := json.Marshal(p)
			require.NoError(t, err)
			var back Plan
			require.NoError(t, json.Unmarshal(b, &back))
			require.Equal(t, p, &back)
		})
	}
}

func TestComplaintHandlerPlan(t *testing.T) {
	p, err := LoadFile("../../specs/complaint-handler.yaml")
	require.NoError(t, err)
	require.Equal(t, "complaint-handler-v2", p.Name)
	require.Equal(t, "2.3.1", p.Version)
	require.Equal(t, []InputDecl{{Name: "email_id", Type: TypeString, Required: true}}, p.Inputs)
	require.Len(t, p.SpecHash, 64)

	deps := map[string][]string{}
	explicit := map[string][]string{}
	for _, s := range p.Steps {
		deps[s.ID] = s.DependsOn
		explicit[s.ID] = s.ExplicitDependsOn
	}
	require.Equal(t, map[string][]string{
		"fetch_email":       nil,
		"extract_entities":  {"fetch_email"},
		"validate_billing":  {"extract_entities"}, // implicit only: the seed writes no depends_on
		"escalate_to_human": {"validate_billing", "extract_entities", "fetch_email"},
		"send_compensation": {"validate_billing", "fetch_email"},
	}, deps)
	require.Nil(t, explicit["validate_billing"])
	require.Equal(t, []string{"validate_billing"}, explicit["escalate_to_human"])

	fetch, ok := p.Step("fetch_email")
	require.True(t, ok)
	require.Equal(t, 30*time.Second, fetch.Timeout)
	require.Equal(t, map[string]any{"email_id": "{{ .inputs.email_id }}"}, fetch.Inputs)
	// built-in defaults
	extract, _ := p.Step("extract_entities")
	require.Equal(t, DefaultTimeout, extract.Timeout)
	require.Equal(t, Resources{NanoCPUs: 1e9, MemoryBytes: 512 << 20, DiskBytes: 256 << 20, Pids: 256, MaxOutputBytes: 8 << 20}, extract.Resources)
	validate, _ := p.Step("validate_billing")
	require.Equal(t, "{{ .steps.extract_entities.output.issue_type == 'billing_error' }}", validate.If)
	require.Equal(t, []OutputDecl{{Name: "resolution_status", Value: "{{ .steps.send_compensation.status or .steps.escalate_to_human.status }}"}}, p.Outputs)
	require.Nil(t, p.Schedule)
}

func TestDailyNewsPlan(t *testing.T) {
	p, err := LoadFile("../../specs/daily-tech-news.yaml")
	require.NoError(t, err)
	require.Empty(t, p.Inputs)
	require.Equal(t, []SecretDecl{{Name: "slack_webhook_url", Source: "vault://prod/slack/webhook"}}, p.Secrets)
	want := map[string][]string{
		"fetch_rss":      nil,
		"summarize_news": {"fetch_rss"},
		"render_md":      {"summarize_news"},
		"post_to_slack":  {"render_md"},
	}
	for _, s := range p.Steps {
		require.Equal(t, want[s.ID], s.DependsOn, s.ID)
	}
	sum, _ := p.Step("summarize_news")
	require.Equal(t, Resources{NanoCPUs: 2e9, MemoryBytes: 4 << 30, DiskBytes: 256 << 20, Pids: 256, GPUs: 1, MaxOutputBytes: 8 << 20}, sum.Resources)
	require.Equal(t, "{{ .steps.fetch_rss.output.items | map('content') | join('\n\n') }}", sum.Inputs["texts"])
	require.Equal(t, 180*time.Second, sum.Timeout)
	fetch, _ := p.Step("fetch_rss")
	require.Equal(t, float64(10), fetch.Inputs["limit"])
	render, _ := p.Step("render_md")
	require.Equal(t, `Daily Tech News Summary - {{ now | date "2006-01-02" }}`, render.Inputs["title"])
	post, _ := p.Step("post_to_slack")
	require.Equal(t, []string{"slack_webhook_url"}, post.Secrets)
	require.Empty(t, sum.Secrets, "a step sees only the secrets it references")
	require.Equal(t, &PlanSchedule{Cron: "0 0 9 * * ?", Timezone: "America/Los_Angeles", TemporalCron: "0 0 9 * * * *"}, p.Schedule)
}

func TestSpecHashIsOfSourceBytes(t *testing.T) {
	data, err := os.ReadFile("../../specs/complaint-handler.yaml")
	require.NoError(t, err)
	a, err := Load("a.yaml", data)
	require.NoError(t, err)
	b, err := Load("b.yaml", append(data, "# trailing comment\n"...))
	require.NoError(t, err)
	require.NotEqual(t, a.SpecHash, b.SpecHash)
	require.Equal(t, "a.yaml", a.SourceFile)
}
