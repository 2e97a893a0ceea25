package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// running tracks the step attempts this worker is running, so a stuck
// step is visible while it is stuck, not only when (if ever) it ends:
// counters and histograms only move when an attempt finishes. The gauges
// are computed at scrape time from the start times.
type running struct {
	now func() time.Time

	mu       sync.Mutex
	next     uint64
	attempts map[uint64]runningAttempt

	count, oldest, overdue *prometheus.Desc
}

type runningAttempt struct {
	start time.Time
	limit time.Duration
}

func newRunning(now func() time.Time) *running {
	return &running{
		now:      now,
		attempts: map[uint64]runningAttempt{},
		count: prometheus.NewDesc("agentflow_step_attempts_running",
			"Step attempts this worker is running now.", nil, nil),
		oldest: prometheus.NewDesc("agentflow_step_attempt_oldest_running_seconds",
			"Age of the oldest step attempt this worker is running (0 when none).", nil, nil),
		overdue: prometheus.NewDesc("agentflow_step_attempts_overdue",
			"Step attempts running longer than their whole budget (step timeout + provisioning margin): stuck, since Temporal has already given up on them.", nil, nil),
	}
}

// start records one running attempt whose whole budget is limit; the
// returned func ends it (idempotent).
func (r *running) start(limit time.Duration) func() {
	r.mu.Lock()
	r.next++
	id := r.next
	r.attempts[id] = runningAttempt{start: r.now(), limit: limit}
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			delete(r.attempts, id)
			r.mu.Unlock()
		})
	}
}

func (r *running) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.count
	ch <- r.oldest
	ch <- r.overdue
}

func (r *running) Collect(ch chan<- prometheus.Metric) {
	now := r.now()
	r.mu.Lock()
	var oldest time.Duration
	overdue := 0
	for _, a := range r.attempts {
		age := now.Sub(a.start)
		oldest = max(oldest, age)
		if a.limit > 0 && age > a.limit {
			overdue++
		}
	}
	n := len(r.attempts)
	r.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(r.count, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(r.oldest, prometheus.GaugeValue, oldest.Seconds())
	ch <- prometheus.MustNewConstMetric(r.overdue, prometheus.GaugeValue, float64(overdue))
}
