package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestTemporalHandlerLandsOnRegistry(t *testing.T) {
	m := New()
	h := m.TemporalHandler().WithTags(map[string]string{"namespace": "default"})

	h.WithTags(map[string]string{"spec": "news"}).Counter(RunStartedTotal).Inc(2)
	h.WithTags(map[string]string{"spec": "news"}).Counter(RunStartedTotal).Inc(1)
	h.Counter(RunStartedTotal).Inc(1)  // same family, fewer tags
	h.Counter(RunStartedTotal).Inc(-5) // ignored: counters never go down
	h.Gauge("temporal_num_pollers").Update(3)
	h.Gauge("temporal_num_pollers").Update(2)
	h.WithTags(map[string]string{"activity_type": "RunStep"}).Timer("temporal_activity_execution_latency").Record(30 * time.Millisecond)
	h.Timer("temporal_num_pollers").Record(time.Second) // kind clash: dropped, no panic
	h.Counter("weird-name.with.dots").Inc(1)

	// SDK names are kept as the SDK documents them (e.g. temporal_request,
	// a counter without _total), so they are not linted here.
	require.NoError(t, testutil.GatherAndCompare(m.Registry, strings.NewReader(`
# HELP agentflow_run_started_total Temporal SDK metric agentflow_run_started_total.
# TYPE agentflow_run_started_total counter
agentflow_run_started_total{namespace="default",spec=""} 1
agentflow_run_started_total{namespace="default",spec="news"} 3
# HELP temporal_num_pollers Temporal SDK metric temporal_num_pollers.
# TYPE temporal_num_pollers gauge
temporal_num_pollers{namespace="default"} 2
# HELP weird_name_with_dots Temporal SDK metric weird_name_with_dots.
# TYPE weird_name_with_dots counter
weird_name_with_dots{namespace="default"} 1
`), RunStartedTotal, "temporal_num_pollers", "weird_name_with_dots"))

	n, err := testutil.GatherAndCount(m.Registry, "temporal_activity_execution_latency")
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func TestAgentflowMetricsNames(t *testing.T) {
	m := New()
	m.RunEnded("news", "SUCCEEDED", 4*time.Minute)
	m.ObservePhase(PhaseExec, time.Second, nil)
	m.ActiveSandboxes.Inc()
	m.ReapedSandboxes.Add(2)
	m.AttemptFailed("echo:1", FailureTool, "ToolFailed")
	m.AttemptFailed("echo:1", FailureInfrastructure, "SandboxLost")
	m.AttemptFailed("echo:1", FailureInfrastructure, "SandboxLost")
	m.AttemptAdopted("echo:1")
	require.NoError(t, testutil.GatherAndCompare(m.Registry, strings.NewReader(`
# HELP agentflow_step_attempt_failures_total Failed step attempts by tool, class (tool, infrastructure, other) and failure type.
# TYPE agentflow_step_attempt_failures_total counter
agentflow_step_attempt_failures_total{class="infrastructure",tool="echo:1",type="SandboxLost"} 2
agentflow_step_attempt_failures_total{class="tool",tool="echo:1",type="ToolFailed"} 1
# HELP agentflow_step_attempts_adopted_total Step attempts that adopted the recorded result of an earlier finished attempt instead of running the tool.
# TYPE agentflow_step_attempts_adopted_total counter
agentflow_step_attempts_adopted_total{tool="echo:1"} 1
`), "agentflow_step_attempt_failures_total", "agentflow_step_attempts_adopted_total"))
	require.InDelta(t, 1, testutil.ToFloat64(m.RunFinished.WithLabelValues("news", "succeeded")), 0)
	require.InDelta(t, 2, testutil.ToFloat64(m.ReapedSandboxes), 0)

	problems, err := testutil.GatherAndLint(m.Registry)
	require.NoError(t, err)
	require.Empty(t, problems)

	mfs, err := m.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		name := mf.GetName()
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		require.True(t, strings.HasPrefix(name, "agentflow_"), name)
	}
	var nilM *Metrics
	nilM.ObservePhase(PhaseExec, time.Second, nil) // nil-safe for tests without metrics
	nilM.AttemptFailed("t", FailureTool, "ToolFailed")
	nilM.AttemptAdopted("t")
	nilM.PoolTake(true)
	nilM.RunEnded("s", "FAILED", time.Second)
	nilM.ToolInvoked("t", "", "", time.Second)
	nilM.WebhookDelivered(nil)
}

// The seed's question `agentflow_run_duration_seconds_bucket{le="300"}`
// has an answer: a five-minute run lands in that bucket, a longer one not.
func TestRunDurationHasTheSeedBucket(t *testing.T) {
	m := New()
	m.RunEnded("news", "SUCCEEDED", 300*time.Second)
	m.RunEnded("news", "SUCCEEDED", 301*time.Second)
	mfs, err := m.Registry.Gather()
	require.NoError(t, err)
	var found bool
	for _, mf := range mfs {
		if mf.GetName() != "agentflow_run_duration_seconds" {
			continue
		}
		for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
			if b.GetUpperBound() == 300 {
				found = true
				require.Equal(t, uint64(1), b.GetCumulativeCount())
			}
		}
	}
	require.True(t, found, "no le=\"300\" bucket")
}

func TestToolInvoked(t *testing.T) {
	m := New()
	m.ToolInvoked("rss:1", "ToolFailed", ReasonParseError, time.Second)
	m.ToolInvoked("rss:1", "", "", time.Second)
	m.ToolInvoked("rss:1", "canceled", "", time.Second)
	require.NoError(t, testutil.GatherAndCompare(m.Registry, strings.NewReader(`
# HELP agentflow_tool_invocations_total Tool attempts by tool, status (success, failed, canceled) and reason (none, or what failed: a closed set).
# TYPE agentflow_tool_invocations_total counter
agentflow_tool_invocations_total{reason="canceled",status="canceled",tool="rss:1"} 1
agentflow_tool_invocations_total{reason="none",status="success",tool="rss:1"} 1
agentflow_tool_invocations_total{reason="parse_error",status="failed",tool="rss:1"} 1
`), "agentflow_tool_invocations_total"))
	require.Equal(t, 3, testutil.CollectAndCount(m.StepDuration))
}
