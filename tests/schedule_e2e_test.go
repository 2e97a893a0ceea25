//go:build e2e

package tests

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/workflows"
)

// scheduleDoc mirrors `agentctl schedule describe -o json`.
type scheduleDoc struct {
	ID            string      `json:"id"`
	Spec          string      `json:"spec"`
	Cron          string      `json:"cron"`
	Timezone      string      `json:"timezone"`
	Paused        bool        `json:"paused"`
	Note          string      `json:"note"`
	NextFireTimes []time.Time `json:"next_fire_times"`
	RecentActions []struct {
		AgentID string `json:"agent_id"`
		RunID   string `json:"run_id"`
	} `json:"recent_actions"`
}

func scheduleSpec(name, cron, tz string) string {
	s := "name: " + name + "\nversion: \"1.0.0\"\nschedule: {cron: \"" + cron + "\""
	if tz != "" {
		s += ", timezone: \"" + tz + "\""
	}
	return s + "}\nsteps:\n  - id: only\n    tool: testtool:1.0\n    inputs: {mode: ok, msg: scheduled}\n"
}

// nextDaily returns the n next instants strictly after now at h:m:00 local
// time in loc on days accepted by day. time.Date normalises per date, so
// DST changes are handled the way a wall-clock schedule expects.
func nextDaily(now time.Time, loc *time.Location, h, m, n int, day func(time.Weekday) bool) []time.Time {
	local := now.In(loc)
	var out []time.Time
	for d := 0; len(out) < n; d++ {
		c := time.Date(local.Year(), local.Month(), local.Day()+d, h, m, 0, 0, loc)
		if c.After(now) && day(c.Weekday()) {
			out = append(out, c.UTC())
		}
	}
	return out
}

// requireFires checks got against the fire times expected from the moment
// before the schedule was created; if a fire time passed while the test ran
// (a boundary crossed between create and describe), the server rightly
// starts from the next one, so the times expected from now are accepted too.
func requireFires(t *testing.T, got []time.Time, before time.Time, want func(now time.Time) []time.Time) {
	t.Helper()
	got = utc(got)
	if w := want(time.Now()); equalTimes(got, w) {
		return
	}
	require.Equal(t, want(before), got)
}

func equalTimes(a, b []time.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

func utc(ts []time.Time) []time.Time {
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = t.UTC()
	}
	return out
}

func TestSchedule(t *testing.T) {
	e := startCLIEnv(t)
	code, _, _ := e.agentctl(t, "tool", "register", "--name", "testtool", "--version", "1.0", "--image", e.images["testtool"])
	require.Equal(t, 0, code)

	describe := func(t *testing.T, id string) scheduleDoc {
		t.Helper()
		var d scheduleDoc
		e.mustJSON(t, &d, "schedule", "describe", id, "-o", "json")
		return d
	}
	create := func(t *testing.T, id, body string, extra ...string) {
		t.Helper()
		args := append([]string{"schedule", "create", "-f", e.writeSpec(t, id, body), "--id", id}, extra...)
		code, _, errOut := e.agentctl(t, args...)
		require.Equal(t, 0, code, "stderr: %s", errOut)
		t.Cleanup(func() { e.agentctl(t, "schedule", "delete", id) })
	}
	anyDay := func(time.Weekday) bool { return true }
	weekday := func(d time.Weekday) bool { return d != time.Saturday && d != time.Sunday }

	t.Run("quartz daily 09:00 Los Angeles", func(t *testing.T) {
		la, err := time.LoadLocation("America/Los_Angeles")
		require.NoError(t, err)
		now := time.Now()
		create(t, "sched-la", scheduleSpec("sched-la", "0 0 9 * * ?", "America/Los_Angeles"))
		d := describe(t, "sched-la")
		require.Equal(t, "0 0 9 * * ?", d.Cron)
		require.Equal(t, "America/Los_Angeles", d.Timezone)
		require.False(t, d.Paused)
		requireFires(t, d.NextFireTimes, now, func(now time.Time) []time.Time { return nextDaily(now, la, 9, 0, 5, anyDay) })

		// The human form shows the times in the schedule's zone.
		code, out, _ := e.agentctl(t, "schedule", "describe", "sched-la")
		require.Equal(t, 0, code)
		require.Contains(t, out, "09:00:00 P") // PST or PDT
	})

	t.Run("five-field every 5 minutes", func(t *testing.T) {
		now := time.Now()
		create(t, "sched-5m", scheduleSpec("sched-5m", "*/5 * * * *", ""))
		d := describe(t, "sched-5m")
		requireFires(t, d.NextFireTimes, now, func(now time.Time) []time.Time {
			first := now.UTC().Truncate(5 * time.Minute).Add(5 * time.Minute)
			var out []time.Time
			for i := range 5 {
				out = append(out, first.Add(time.Duration(i)*5*time.Minute))
			}
			return out
		})
	})

	for _, tc := range []struct{ id, cron string }{
		{"sched-wd-names", "0 30 8 ? * MON-FRI"},
		{"sched-wd-quartz-numbers", "0 30 8 ? * 2-6"}, // Quartz: 1 = Sunday
	} {
		t.Run("weekdays 08:30 "+tc.cron, func(t *testing.T) {
			now := time.Now()
			create(t, tc.id, scheduleSpec(tc.id, tc.cron, "UTC"))
			d := describe(t, tc.id)
			requireFires(t, d.NextFireTimes, now, func(now time.Time) []time.Time { return nextDaily(now, time.UTC, 8, 30, 5, weekday) })
			for _, ft := range d.NextFireTimes {
				require.True(t, weekday(ft.UTC().Weekday()), "%s is a weekend", ft)
			}
		})
	}

	t.Run("create refuses a spec without schedule and a duplicate ID", func(t *testing.T) {
		code, _, errOut := e.agentctl(t, "schedule", "create", "-f", e.writeSpec(t, "plain", okSpec))
		require.Equal(t, 2, code)
		require.Contains(t, errOut, "has no schedule")

		create(t, "sched-dup", scheduleSpec("sched-dup", "0 0 9 * * ?", ""))
		code, _, errOut = e.agentctl(t, "schedule", "create", "-f", e.writeSpec(t, "dup2", scheduleSpec("sched-dup", "0 0 9 * * ?", "")), "--id", "sched-dup")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, "already exists")
	})

	t.Run("trigger, pause, unpause, list, delete", func(t *testing.T) {
		const id = "sched-life"
		create(t, id, scheduleSpec(id, "0 0 9 * * ?", "Europe/Berlin"), "--paused")
		d := describe(t, id)
		require.True(t, d.Paused)

		// A trigger runs even a paused schedule.
		code, _, _ := e.agentctl(t, "schedule", "trigger", id)
		require.Equal(t, 0, code)
		var agentID, runID string
		require.Eventually(t, func() bool {
			d = describe(t, id)
			if len(d.RecentActions) == 0 {
				return false
			}
			agentID, runID = d.RecentActions[0].AgentID, d.RecentActions[0].RunID
			return true
		}, time.Minute, 200*time.Millisecond, "the triggered run never showed in recent actions")
		require.True(t, strings.HasPrefix(agentID, id+"-"), "agent ID %q must start with the schedule ID", agentID)

		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		require.NoError(t, e.client.GetWorkflow(ctx, agentID, runID).Get(ctx, nil))
		var st workflows.Status
		e.mustJSON(t, &st, "inspect", agentID)
		require.Equal(t, workflows.RunSucceeded, st.Status)
		require.Equal(t, agentID, st.ID)

		code, _, _ = e.agentctl(t, "schedule", "unpause", id)
		require.Equal(t, 0, code)
		require.False(t, describe(t, id).Paused)
		code, _, _ = e.agentctl(t, "schedule", "pause", id, "--note", "holiday")
		require.Equal(t, 0, code)
		d = describe(t, id)
		require.True(t, d.Paused)
		require.Equal(t, "holiday", d.Note)

		// Listing goes through visibility, which lags a little.
		require.Eventually(t, func() bool {
			code, out, _ := e.agentctl(t, "schedule", "list", "-o", "json")
			var rows []scheduleDoc
			if code != 0 || json.Unmarshal([]byte(out), &rows) != nil {
				return false
			}
			for _, r := range rows {
				if r.ID == id {
					return r.Paused && r.Cron == "0 0 9 * * ?" && r.Spec == id
				}
			}
			return false
		}, 30*time.Second, 200*time.Millisecond, "schedule list never showed %s paused", id)

		code, _, _ = e.agentctl(t, "schedule", "delete", id)
		require.Equal(t, 0, code)
		for _, verb := range []string{"describe", "trigger", "pause", "unpause", "delete"} {
			code, _, errOut := e.agentctl(t, "schedule", verb, id)
			require.Equal(t, 1, code, verb)
			require.Contains(t, errOut, `schedule "`+id+`" not found`, verb)
		}
	})
}
