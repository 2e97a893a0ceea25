package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/metrics"
)

// Every query shipped in deploy/ (the Grafana dashboard, the alerting and
// recording rules) reads only metrics a worker exports, with label names
// those metrics carry: a renamed metric or label fails here instead of
// leaving an empty panel or an alert that can never fire.

const (
	alertsFile    = "prometheus/alerts.yml"
	dashboardFile = "grafana/agentflow.json"
)

// family is what a query may read of one exported metric.
type family struct {
	labels map[string]bool // nil: any (Temporal SDK families)
}

// scrapeLabels are added by Prometheus to every scraped series; le is a
// histogram bucket's bound.
var scrapeLabels = []string{"job", "instance"}

// touchAll records one observation in every agentflow collector, so the
// registry's Gather shows every family with its labels (a vector shows
// nothing until a child exists). A collector added without a line here
// fails TestEveryCollectorTouched.
func touchAll(m *metrics.Metrics) {
	m.RunEnded("news", "FAILED", time.Second)
	m.ToolInvoked("echo:1", "ToolFailed", metrics.ReasonParseError, time.Second)
	m.StepRetries.WithLabelValues("echo:1").Inc()
	m.AttemptFailed("echo:1", metrics.FailureTool, "ToolFailed")
	m.AttemptAdopted("echo:1")
	m.ObservePhase(metrics.PhaseExec, time.Second, nil)
	m.ObserveCheckpoint(1024)
	m.ObserveOutput(10)
	m.SandboxUp()
	m.Reaped(1)
	m.WebhookDelivered(nil)
	m.ObserveEgress("echo:1", true, 1, 1)
	m.PoolTake(true)
	m.AttemptRunning(time.Minute)()
	m.TemporalHandler().WithTags(map[string]string{
		"namespace": "default", "task_queue": "agentflow", "workflow_type": "AgentWorkflow", "spec": "news",
	}).Counter(metrics.RunStartedTotal).Inc(1)
}

// exported is every metric a query may name: the real registry's
// families (after touchAll), histogram series by their suffixes, and the
// Temporal SDK families agentflow relies on (metrics.TemporalSDK, checked
// against a real worker in tests/). Prometheus' own `up` is there too.
func exported(t *testing.T) map[string]family {
	t.Helper()
	m := metrics.New()
	touchAll(m)
	mfs, err := m.Registry.Gather()
	require.NoError(t, err)
	out := map[string]family{"up": {labels: map[string]bool{}}}
	for _, mf := range mfs {
		labels := map[string]bool{}
		for _, metric := range mf.GetMetric() {
			for _, lp := range metric.GetLabel() {
				labels[lp.GetName()] = true
			}
		}
		name := mf.GetName()
		// By the type's name: client_model stays an indirect requirement.
		switch mf.GetType().String() {
		case "HISTOGRAM":
			out[name+"_sum"] = family{labels: labels}
			out[name+"_count"] = family{labels: labels}
			bucket := family{labels: map[string]bool{"le": true}}
			for l := range labels {
				bucket.labels[l] = true
			}
			out[name+"_bucket"] = bucket
		case "SUMMARY":
			out[name+"_sum"] = family{labels: labels}
			out[name+"_count"] = family{labels: labels}
			out[name] = family{labels: labels}
		default:
			out[name] = family{labels: labels}
		}
	}
	for _, name := range metrics.TemporalSDK {
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			out[name+suffix] = family{} // the SDK's tags vary by call site
		}
	}
	return out
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Every collector the registry describes shows up in Gather after
// touchAll, so exported() misses no family.
func TestEveryCollectorTouched(t *testing.T) {
	m := metrics.New()
	touchAll(m)
	ch := make(chan *prometheus.Desc, 256)
	go func() { m.Registry.Describe(ch); close(ch) }()
	var described []string
	for d := range ch {
		match := fqName.FindStringSubmatch(d.String())
		require.NotNil(t, match, "desc %s", d)
		if strings.HasPrefix(match[1], "agentflow_") {
			described = append(described, match[1])
		}
	}
	require.NotEmpty(t, described)
	mfs, err := m.Registry.Gather()
	require.NoError(t, err)
	var gathered []string
	for _, mf := range mfs {
		gathered = append(gathered, mf.GetName())
	}
	for _, name := range described {
		require.Contains(t, gathered, name, "collector %s is not touched by touchAll: add it", name)
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// query is one PromQL expression found in a deploy file.
type query struct {
	where string
	expr  string
}

// ruleQueries returns every rule expression and the recording rules'
// names (which later rules and the dashboard may read).
func ruleQueries(t *testing.T) ([]query, []string) {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	require.NoError(t, err)
	var rf ruleFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&rf))
	var qs []query
	var records []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			name := r.Alert
			if r.Record != "" {
				name = r.Record
				records = append(records, r.Record)
			}
			require.NotEmpty(t, strings.TrimSpace(r.Expr), "%s %s has no expr", alertsFile, name)
			qs = append(qs, query{where: alertsFile + ": " + name, expr: r.Expr})
		}
	}
	return qs, records
}

var labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

// dashboardQueries returns every panel target's expr (rows' nested panels
// too) and every templating query, as PromQL.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	type target struct {
		Expr string `json:"expr"`
	}
	type panel struct {
		Title   string   `json:"title"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"`
	}
	var d struct {
		UID        string  `json:"uid"`
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(b, &d))
	require.NotEmpty(t, d.UID)
	var qs []query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for i, tg := range p.Targets {
				require.NotEmpty(t, strings.TrimSpace(tg.Expr), "%s: panel %q target %d has no expr", dashboardFile, p.Title, i)
				qs = append(qs, query{where: fmt.Sprintf("%s: panel %q", dashboardFile, p.Title), expr: tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		require.NoError(t, json.Unmarshal(v.Query, &q), "variable %s", v.Name)
		m := labelValues.FindStringSubmatch(q.Query)
		require.NotNil(t, m, "variable %s: want label_values(metric, label), got %q", v.Name, q.Query)
		qs = append(qs, query{where: dashboardFile + ": variable " + v.Name, expr: m[1] + `{` + m[2] + `=""}`})
	}
	return qs
}

func TestQueriesNameExportedMetrics(t *testing.T) {
	known := exported(t)
	rules, records := ruleQueries(t)
	for _, r := range records {
		known[r] = family{} // a recording rule's labels are its expression's
	}
	dash := dashboardQueries(t)
	require.GreaterOrEqual(t, len(dash), 25, "the dashboard's queries")

	used := map[string]bool{}
	for _, q := range append(rules, dash...) {
		names, err := checkQuery(known, q.expr)
		require.NoError(t, err, "%s: %s", q.where, q.expr)
		require.NotEmpty(t, names, "%s reads no metric: %s", q.where, q.expr)
		for _, n := range names {
			used[n] = true
		}
	}
	// What the issue asks of the dashboard and the alerts is there.
	for _, name := range []string{
		"agentflow_run_finished_total", "agentflow_step_duration_seconds_bucket", "agentflow_tool_invocations_total",
		"agentflow_sandbox_phase_duration_seconds_bucket", "temporal_activity_schedule_to_start_latency_bucket",
		"agentflow_sandbox_reaped_total", "agentflow_webhook_deliveries_total", "agentflow_step_attempts_overdue",
		"agentflow_run_started_total", "up",
	} {
		require.True(t, used[name], "no query reads %s", name)
	}
}

// The webhook failure condition is written once: only the recording rule
// selects the deliveries counter by result; the alert and the dashboard
// read the recording rule (a dedicated failures counter would change that
// one rule).
func TestWebhookFailureExpressionWrittenOnce(t *testing.T) {
	rules, _ := ruleQueries(t)
	var readers []string
	for _, q := range append(rules, dashboardQueries(t)...) {
		sels, err := selectors(q.expr)
		require.NoError(t, err)
		for _, s := range sels {
			if s.Name == "agentflow_webhook_deliveries_total" && slices.Contains(s.Labels, "result") {
				readers = append(readers, q.where)
			}
		}
	}
	require.Equal(t, []string{alertsFile + ": agentflow:webhook_delivery_failures:increase5m"}, readers)
}

// checkQuery returns the metrics expr reads, or an error naming one that
// is not exported or a label it does not have.
func checkQuery(known map[string]family, expr string) ([]string, error) {
	sels, err := selectors(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range sels {
		f, ok := known[s.Name]
		if !ok {
			return nil, fmt.Errorf("reads %s, which no worker exports", s.Name)
		}
		names = append(names, s.Name)
		if f.labels == nil {
			continue
		}
		for _, l := range s.Labels {
			if !f.labels[l] && !slices.Contains(scrapeLabels, l) {
				return nil, fmt.Errorf("matches %s on label %q, which it does not have", s.Name, l)
			}
		}
	}
	return names, nil
}

// The check fails on what a worker does not export.
func TestCheckQueryCatchesUnknownNames(t *testing.T) {
	known := exported(t)
	tests := []struct {
		name, expr, want string
	}{
		{"typo", `sum(rate(agentflow_tool_invocation_total[5m]))`, "agentflow_tool_invocation_total, which no worker exports"},
		{"wrong label", `agentflow_run_finished_total{state="failed"}`, `label "state"`},
		{"le on a counter", `agentflow_run_finished_total{le="300"}`, `label "le"`},
		{"SDK name with a unit it lacks", `temporal_activity_schedule_to_start_latency_seconds_bucket`, "which no worker exports"},
		{"the seed's metric name", `docker_agent_smartagent_total{status="failed"}`, "which no worker exports"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := checkQuery(known, tc.expr)
			require.ErrorContains(t, err, tc.want)
		})
	}
	names, err := checkQuery(known, `sum(increase(agentflow_run_finished_total{status="failed",instance="w1"}[1h])) / on() group_left sum(up)`)
	require.NoError(t, err)
	require.Equal(t, []string{"agentflow_run_finished_total", "up"}, names)
}
