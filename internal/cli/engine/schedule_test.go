package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/workflows"
)

const scheduledSpec = `name: nightly
version: "1.0.0"
schedule: {cron: "0 30 8 ? * MON-FRI", timezone: "America/Los_Angeles"}
inputs:
  - {name: limit, type: number, default: 3}
steps:
  - id: a
    image: sha256:` + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" + `
`

const unscheduledSpec = `name: once
version: "1.0.0"
steps:
  - id: a
    image: sha256:` + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" + `
`

// The cases fail before any server is dialled: the address points nowhere.
func TestScheduleUsageErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	sched := write("sched.yaml", scheduledSpec)
	unsched := write("unsched.yaml", unscheduledSpec)
	broken := write("broken.yaml", "name: x\nsteps: [\n")

	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"create without -f", []string{"schedule", "create"}, "no spec given"},
		{"create with a positional arg", []string{"schedule", "create", "-f", sched, "extra"}, "unknown command"},
		{"spec without schedule", []string{"schedule", "create", "-f", unsched}, "has no schedule:"},
		{"invalid spec", []string{"schedule", "create", "-f", broken}, ""},
		{"missing spec file", []string{"schedule", "create", "-f", filepath.Join(dir, "nope.yaml")}, ""},
		{"mistyped input", []string{"schedule", "create", "-f", sched, "--input", "limit=many"}, "want a number"},
		{"undeclared input", []string{"schedule", "create", "-f", sched, "--input", "bogus=1"}, "bogus"},
		{"bad id", []string{"schedule", "create", "-f", sched, "--id", "has space"}, "use letters"},
		{"unknown flag", []string{"schedule", "create", "--bogus"}, "unknown flag"},
		{"describe without ID", []string{"schedule", "describe"}, "accepts 1 arg"},
		{"trigger two IDs", []string{"schedule", "trigger", "a", "b"}, "accepts 1 arg"},
		{"pause without ID", []string{"schedule", "pause"}, "accepts 1 arg"},
		{"unpause without ID", []string{"schedule", "unpause"}, "accepts 1 arg"},
		{"delete without ID", []string{"schedule", "delete"}, "accepts 1 arg"},
		{"list with an arg", []string{"schedule", "list", "x"}, "unknown command"},
		{"empty ID", []string{"schedule", "describe", " "}, "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"--address", "127.0.0.1:1"}, tt.args...)
			code := Run(context.Background(), "test", args, Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
			require.Equal(t, ExitInvalid, code, "stderr: %s", errb.String())
			require.NotEmpty(t, errb.String())
			require.Contains(t, errb.String(), tt.wantErr)
		})
	}
}

func TestScheduleOptionsFor(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.yaml")
	require.NoError(t, os.WriteFile(p, []byte(scheduledSpec), 0o600))
	plan, err := spec.LoadFile(p)
	require.NoError(t, err)
	require.NotNil(t, plan.Schedule)
	inputs := map[string]any{"limit": 5.0}
	tools := map[string]string{"echo:1.0": "sha256:bbbb"}

	so := scheduleOptionsFor("nightly-x", "", plan, inputs, tools, true)
	require.Equal(t, "nightly-x", so.ID)
	require.Equal(t, []string{plan.Schedule.TemporalCron}, so.Spec.CronExpressions)
	require.Equal(t, "America/Los_Angeles", so.Spec.TimeZoneName)
	require.Equal(t, enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, so.Overlap)
	require.Equal(t, scheduleCatchupWindow, so.CatchupWindow)
	require.True(t, so.Paused)
	require.Equal(t, "0 30 8 ? * MON-FRI", so.Memo[scheduleMemoCron])
	require.Equal(t, "America/Los_Angeles", so.Memo[scheduleMemoTimezone])

	act, ok := so.Action.(*client.ScheduleWorkflowAction)
	require.True(t, ok)
	require.Equal(t, "nightly-x", act.ID, "workflow ID prefix is the schedule ID")
	require.Equal(t, workflows.WorkflowName, act.Workflow)
	require.Equal(t, workflows.TaskQueue, act.TaskQueue)
	require.Len(t, act.Args, 1)
	in, ok := act.Args[0].(workflows.Input)
	require.True(t, ok)
	require.Equal(t, inputs, in.Inputs)
	require.Equal(t, plan.Name, in.Plan.Name)
	require.Equal(t, tools, act.Memo["tools"])
	require.Equal(t, plan.Name, act.Memo[workflows.MemoSpecName])

	sa := act.TypedSearchAttributes
	specVal, ok := sa.GetKeyword(temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrSpec))
	require.True(t, ok)
	require.Equal(t, "nightly", specVal)
	st, _ := sa.GetKeyword(temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrStatus))
	require.Equal(t, workflows.RunPending, st)
	// The workflow sets AgentName to its own (time-suffixed) workflow ID.
	require.False(t, sa.ContainsKey(temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrAgentName)))

	require.Equal(t, "other-q", scheduleOptionsFor("x", "other-q", plan, nil, nil, false).Action.(*client.ScheduleWorkflowAction).TaskQueue)
}

func TestDescribeView(t *testing.T) {
	memo := &commonpb.Memo{Fields: map[string]*commonpb.Payload{}}
	for k, v := range map[string]string{workflows.MemoSpecName: "nightly", scheduleMemoCron: "0 0 9 * * ?", scheduleMemoTimezone: "Europe/Paris"} {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		require.NoError(t, err)
		memo.Fields[k] = p
	}
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	var next []time.Time
	for i := range 7 {
		next = append(next, time.Date(2030, 1, 1+i, 9, 0, 0, 0, paris))
	}
	d := &client.ScheduleDescription{
		Memo:     memo,
		Schedule: client.Schedule{State: &client.ScheduleState{Paused: true, Note: "maintenance"}},
		Info: client.ScheduleInfo{
			NextActionTimes: next,
			RecentActions: []client.ScheduleActionResult{{
				ScheduleTime: next[0], ActualTime: next[0].Add(time.Second),
				StartWorkflowResult: &client.ScheduleWorkflowExecution{WorkflowID: "nightly-2030-01-01T08:00:00Z", FirstExecutionRunID: "r1"},
			}},
			NumActions: 1,
		},
	}
	v := describeView(converter.GetDefaultDataConverter(), "nightly", d)
	require.Equal(t, "nightly", v.Spec)
	require.Equal(t, "0 0 9 * * ?", v.Cron)
	require.Equal(t, "Europe/Paris", v.Timezone)
	require.True(t, v.Paused)
	require.Equal(t, "maintenance", v.Note)
	require.Len(t, v.NextFireTimes, scheduleNextTimes)
	require.Equal(t, time.Date(2030, 1, 1, 8, 0, 0, 0, time.UTC), v.NextFireTimes[0])
	require.Equal(t, []scheduleAction{{ScheduledAt: next[0].UTC(), StartedAt: next[0].Add(time.Second).UTC(), AgentID: "nightly-2030-01-01T08:00:00Z", RunID: "r1"}}, v.RecentActions)
}

func TestScheduleErr(t *testing.T) {
	err := scheduleErr("gone", "describe", serviceerror.NewNotFound("schedule not found"))
	require.Equal(t, ExitFailure, exitCode(err))
	require.Equal(t, `schedule "gone" not found`, err.Error())

	err = scheduleErr("x", "pause", serviceerror.NewUnavailable("down"))
	require.Equal(t, ExitFailure, exitCode(err))
	require.Contains(t, err.Error(), "pause schedule x: down")
}
