// Package metrics holds the worker's Prometheus metrics (SPEC §9) on their
// own registry, and an adapter that puts the Temporal SDK's metrics (and the
// ones workflow code emits through workflow.GetMetricsHandler) on the same
// registry.
//
// Names follow agentflow_<subsystem>_<name>_<unit>.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.temporal.io/sdk/client"
)

// Names of metrics that are emitted through the Temporal metrics handler
// rather than registered here, because they are counted in workflow code
// (replay-aware through workflow.GetMetricsHandler).
const (
	// RunStartedTotal is incremented once per run by AgentWorkflow with the
	// tag "spec" (the SDK adds namespace, task_queue, workflow_type).
	RunStartedTotal = "agentflow_run_started_total"
)

// Sandbox phases measured around ExecutionHost calls.
const (
	PhaseProvision  = "provision"
	PhaseRestore    = "restore"
	PhaseExec       = "exec"
	PhaseCheckpoint = "checkpoint"
	PhaseTerminate  = "terminate"
)

// Failure classes of AttemptFailures.
const (
	FailureTool           = "tool"           // the tool failed (exit, output, timeout): counts against retries
	FailureInfrastructure = "infrastructure" // sandbox, worker, store or image: retried on its own budget
	FailureOther          = "other"          // policy, invalid input, missing image: not retried
)

// Metrics are the worker's collectors. The zero value is not usable; use New.
type Metrics struct {
	Registry *prometheus.Registry

	// RunFinished and RunDuration: status is RunStatus's lower case
	// (succeeded|failed|canceled); use RunEnded.
	RunFinished  *prometheus.CounterVec   // spec, status
	RunDuration  *prometheus.HistogramVec // spec, status
	StepDuration *prometheus.HistogramVec // tool, status
	// ToolInvocations: status success|failed|canceled and reason, one of
	// Reasons(); use ToolInvoked.
	ToolInvocations *prometheus.CounterVec // tool, status, reason
	StepRetries     *prometheus.CounterVec // tool
	// AttemptFailures counts failed attempts by tool, class (FailureTool,
	// FailureInfrastructure, FailureOther) and failure type, so a broken
	// tool and a broken machine never look alike on a dashboard.
	AttemptFailures *prometheus.CounterVec // tool, class, type
	// AttemptsAdopted counts attempts that adopted the recorded result of
	// an earlier attempt instead of running the tool again.
	AttemptsAdopted   *prometheus.CounterVec   // tool
	SandboxPhase      *prometheus.HistogramVec // phase, result
	CheckpointBytes   prometheus.Histogram
	OutputBytes       prometheus.Histogram
	ActiveSandboxes   prometheus.Gauge
	ReapedSandboxes   prometheus.Counter
	WebhookDeliveries *prometheus.CounterVec // result
	// EgressConnections counts connections through (or refused at) the
	// egress boundary; EgressBytes the bytes through it (direction out:
	// tool → upstream, in: upstream → tool).
	EgressConnections *prometheus.CounterVec // tool, decision (allowed|refused)
	EgressBytes       *prometheus.CounterVec // tool, direction (out|in)
	// PoolTakes counts poolable provisions by whether the warm pool had
	// a sandbox ready (result hit|miss).
	PoolTakes *prometheus.CounterVec

	sdk     *sdkCollector
	running *running
}

// New registers every agentflow collector, the Go runtime and process
// collectors, and the Temporal SDK adapter on a fresh registry.
func New() *Metrics {
	return newMetrics(time.Now)
}

// durationBuckets are the buckets of every agentflow duration histogram, in
// seconds. 300 is the seed's `le="300"` (five minutes); a test keeps it.
var durationBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

func newMetrics(now func() time.Time) *Metrics {
	reg := prometheus.NewRegistry()
	durations := durationBuckets
	sizes := prometheus.ExponentialBuckets(256, 4, 10) // 256 B .. 64 MiB
	m := &Metrics{
		Registry: reg,
		RunFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentflow_run_finished_total",
			Help: "Runs that reached a terminal status, by spec and status (succeeded, failed, canceled).",
		}, []string{"spec", "status"}),
		RunDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentflow_run_duration_seconds",
			Help:    "Wall time of finished runs, by spec and status.",
			Buckets: durations,
		}, []string{"spec", "status"}),
		StepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentflow_step_duration_seconds",
			Help:    "Wall time of one step attempt (provision to terminate), by tool and status (success, failed, canceled).",
			Buckets: durations,
		}, []string{"tool", "status"}),
		ToolInvocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentflow_tool_invocations_total",
			Help: "Tool attempts by tool, status (success, failed, canceled) and reason (none, or what failed: a closed set).",
		}, []string{"tool", "status", "reason"}),
		StepRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentflow_step_retries_total",
			Help: "Step attempts after the first, by tool.",
		}, []string{"tool"}),
		AttemptFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentflow_step_attempt_failures_total",
			Help: "Failed step attempts by tool, class (tool, infrastructure, other) and failure type.",
		}, []string{"tool", "class", "type"}),
		AttemptsAdopted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentflow_step_attempts_adopted_total",
			Help: "Step attempts that adopted the recorded result of an earlier finished attempt instead of running the tool.",
		}, []string{"tool"}),
		SandboxPhase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentflow_sandbox_phase_duration_seconds",
			Help:    "Duration of sandbox phases (provision, restore, exec, checkpoint, terminate).",
			Buckets: durations,
		}, []string{"phase", "result"}),
		CheckpointBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "agentflow_sandbox_checkpoint_bytes",
			Help:    "Size of workspace checkpoints.",
			Buckets: sizes,
		}),
		OutputBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "agentflow_step_output_bytes",
			Help:    "Size of tool stdout per attempt.",
			Buckets: sizes,
		}),
		ActiveSandboxes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentflow_sandbox_active",
			Help: "Sandboxes currently provisioned by this worker.",
		}),
		ReapedSandboxes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentflow_sandbox_reaped_total",
			Help: "Orphaned sandboxes removed by the reaper.",
		}),
		WebhookDeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentflow_webhook_deliveries_total",
			Help: "Run-finished webhook deliveries by result (ok or error).",
		}, []string{"result"}),
		EgressConnections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentflow_egress_connections_total",
			Help: "Connections of steps through the egress boundary, by tool and decision (allowed or refused).",
		}, []string{"tool", "decision"}),
		EgressBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentflow_egress_bytes_total",
			Help: "Bytes through the egress boundary, by tool and direction (out: to upstreams, in: from them).",
		}, []string{"tool", "direction"}),
		PoolTakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentflow_sandbox_pool_takes_total",
			Help: "Provisions the warm sandbox pool could serve, by result (hit: a pre-started sandbox; miss: started cold).",
		}, []string{"result"}),
		sdk:     newSDKCollector(),
		running: newRunning(now),
	}
	// Series an alert divides or matches on exist from the start at 0, so
	// the first error counts in increase() instead of creating the series.
	for _, result := range []string{WebhookOK, WebhookError} {
		m.WebhookDeliveries.WithLabelValues(result)
	}
	reg.MustRegister(
		m.RunFinished, m.RunDuration, m.StepDuration, m.ToolInvocations, m.StepRetries,
		m.AttemptFailures, m.AttemptsAdopted,
		m.SandboxPhase, m.CheckpointBytes, m.OutputBytes, m.ActiveSandboxes, m.ReapedSandboxes,
		m.WebhookDeliveries, m.EgressConnections, m.EgressBytes, m.PoolTakes,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.sdk, m.running,
	)
	return m
}

// TemporalHandler is the client.MetricsHandler to give the Temporal client:
// SDK metrics and workflow-emitted metrics land on Registry.
func (m *Metrics) TemporalHandler() client.MetricsHandler {
	return &handler{c: m.sdk}
}

// ObservePhase records one sandbox phase. result is "ok" or "error".
func (m *Metrics) ObservePhase(phase string, d time.Duration, err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.SandboxPhase.WithLabelValues(phase, result).Observe(d.Seconds())
}

// The helpers below are nil-safe so code paths work without metrics
// (unit tests, tools).

// PoolTake counts one poolable provision (docker.PoolOptions.OnTake).
func (m *Metrics) PoolTake(hit bool) {
	if m == nil {
		return
	}
	result := "miss"
	if hit {
		result = "hit"
	}
	m.PoolTakes.WithLabelValues(result).Inc()
}

// RunEnded records one finished run: status in the workflow's spelling
// (SUCCEEDED, ...), recorded lower case. The spec's other statuses are
// created at 0 on its first run, so a failure ratio over increase() sees
// the spec's first failure too.
func (m *Metrics) RunEnded(spec, status string, d time.Duration) {
	if m == nil {
		return
	}
	s := RunStatus(status)
	for _, other := range runStatuses {
		m.RunFinished.WithLabelValues(spec, other)
	}
	m.RunFinished.WithLabelValues(spec, s).Inc()
	m.RunDuration.WithLabelValues(spec, s).Observe(d.Seconds())
}

// ToolInvoked records one attempt in which the tool ran (or was to run):
// class is its failure class ("" = success), detail the finer cause of a
// ToolFailed (see Reason).
func (m *Metrics) ToolInvoked(tool, class, detail string, d time.Duration) {
	if m == nil {
		return
	}
	status := InvocationStatus(class)
	m.ToolInvocations.WithLabelValues(tool, status, Reason(class, detail)).Inc()
	m.StepDuration.WithLabelValues(tool, status).Observe(d.Seconds())
}

// AttemptRunning marks one step attempt as running on this worker until
// the returned func is called; limit is the attempt's whole budget, past
// which it counts as overdue (agentflow_step_attempts_overdue).
func (m *Metrics) AttemptRunning(limit time.Duration) (done func()) {
	if m == nil {
		return func() {}
	}
	return m.running.start(limit)
}

// Webhook delivery results.
const (
	WebhookOK    = "ok"
	WebhookError = "error"
)

// WebhookDelivered counts one webhook delivery by its outcome.
func (m *Metrics) WebhookDelivered(err error) {
	if m == nil {
		return
	}
	result := WebhookOK
	if err != nil {
		result = WebhookError
	}
	m.WebhookDeliveries.WithLabelValues(result).Inc()
}

// SandboxUp and SandboxDown track the active-sandboxes gauge.
func (m *Metrics) SandboxUp() {
	if m != nil {
		m.ActiveSandboxes.Inc()
	}
}

func (m *Metrics) SandboxDown() {
	if m != nil {
		m.ActiveSandboxes.Dec()
	}
}

// ObserveOutput records the size of a tool's stdout.
func (m *Metrics) ObserveOutput(n int) {
	if m != nil {
		m.OutputBytes.Observe(float64(n))
	}
}

// ObserveCheckpoint records the size of a checkpoint.
func (m *Metrics) ObserveCheckpoint(n int64) {
	if m != nil {
		m.CheckpointBytes.Observe(float64(n))
	}
}

// AttemptFailed counts one failed attempt of class (FailureTool, ...).
func (m *Metrics) AttemptFailed(tool, class, typ string) {
	if m != nil {
		m.AttemptFailures.WithLabelValues(tool, class, typ).Inc()
	}
}

// AttemptAdopted counts one attempt that adopted an earlier result.
func (m *Metrics) AttemptAdopted(tool string) {
	if m != nil {
		m.AttemptsAdopted.WithLabelValues(tool).Inc()
	}
}

// Reaped counts sandboxes removed by the reaper.
func (m *Metrics) Reaped(n int) {
	if m != nil && n > 0 {
		m.ReapedSandboxes.Add(float64(n))
	}
}

// Egress decisions and directions.
const (
	EgressAllowed = "allowed"
	EgressRefused = "refused"
)

// ObserveEgress counts one connection through the egress boundary.
func (m *Metrics) ObserveEgress(tool string, allowed bool, out, in int64) {
	if m == nil {
		return
	}
	decision := EgressRefused
	if allowed {
		decision = EgressAllowed
	}
	m.EgressConnections.WithLabelValues(tool, decision).Inc()
	if out > 0 {
		m.EgressBytes.WithLabelValues(tool, "out").Add(float64(out))
	}
	if in > 0 {
		m.EgressBytes.WithLabelValues(tool, "in").Add(float64(in))
	}
}
