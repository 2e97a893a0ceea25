package metrics

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// clock is a settable time source: the gauges are computed from start
// times at scrape, so the test moves time instead of waiting.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestRunningAttempts(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}
	m := newMetrics(c.now)
	gauges := func(running, oldest, overdue string) string {
		return `
# HELP agentflow_step_attempt_oldest_running_seconds Age of the oldest step attempt this worker is running (0 when none).
# TYPE agentflow_step_attempt_oldest_running_seconds gauge
agentflow_step_attempt_oldest_running_seconds ` + oldest + `
# HELP agentflow_step_attempts_overdue Step attempts running longer than their whole budget (step timeout + provisioning margin): stuck, since Temporal has already given up on them.
# TYPE agentflow_step_attempts_overdue gauge
agentflow_step_attempts_overdue ` + overdue + `
# HELP agentflow_step_attempts_running Step attempts this worker is running now.
# TYPE agentflow_step_attempts_running gauge
agentflow_step_attempts_running ` + running + `
`
	}
	names := []string{"agentflow_step_attempts_running", "agentflow_step_attempt_oldest_running_seconds", "agentflow_step_attempts_overdue"}
	check := func(running, oldest, overdue string) {
		t.Helper()
		require.NoError(t, testutil.GatherAndCompare(m.Registry, strings.NewReader(gauges(running, oldest, overdue)), names...))
	}

	check("0", "0", "0")
	long := m.AttemptRunning(10 * time.Minute)
	c.advance(4 * time.Minute)
	short := m.AttemptRunning(2 * time.Minute)
	check("2", "240", "0")
	c.advance(3 * time.Minute) // short is 3m into a 2m budget
	check("2", "420", "1")
	c.advance(4 * time.Minute) // long is 11m into 10m
	check("2", "660", "2")
	long()
	long() // idempotent: the other attempt stays counted
	check("1", "420", "1")
	short()
	check("0", "0", "0")

	var nilM *Metrics
	nilM.AttemptRunning(time.Minute)() // nil-safe
}
