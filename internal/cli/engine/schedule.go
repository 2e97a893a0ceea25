package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/workflows"
)

// Schedule memo keys: the server keeps a cron string only in its parsed
// (structured calendar) form, so the cron as written is kept in the memo.
const (
	scheduleMemoCron     = "cron"
	scheduleMemoTimezone = "timezone"
)

// scheduleCatchupWindow is how late a missed fire may still start (after
// server downtime). Small on purpose: a daily agent that missed its slot by
// hours should not suddenly run; Temporal's minimum is 10s.
const scheduleCatchupWindow = time.Minute

// scheduleNextTimes is how many upcoming fire times describe shows.
const scheduleNextTimes = 5

type scheduleOptions struct {
	*Options
	dial dialer
}

func newScheduleCmd(g *Options) *cobra.Command {
	o := &scheduleOptions{Options: g, dial: dialerFor(g)}
	cmd := &cobra.Command{
		Use: "schedule",
		Long: `Run a spec on its 'schedule:' (cron and timezone) with Temporal Schedules.
'schedule create' resolves the spec's tools once, so every scheduled run uses
the same digest-pinned images; each run is an agent with the ID
<schedule-id>-<fire time>.`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(
		newScheduleCreateCmd(o),
		newScheduleListCmd(o),
		newScheduleDescribeCmd(o),
		newScheduleTriggerCmd(o),
		newSchedulePauseCmd(o, true),
		newSchedulePauseCmd(o, false),
		newScheduleDeleteCmd(o),
	)
	return cmd
}

type scheduleCreateOptions struct {
	*scheduleOptions
	submitFlags
	ID     string
	Paused bool
}

func newScheduleCreateCmd(so *scheduleOptions) *cobra.Command {
	o := &scheduleCreateOptions{scheduleOptions: so}
	cmd := &cobra.Command{
		Use:   "create -f spec.yaml [--id ID] [--input k=v]... [--input-file f.json] [--paused]",
		Short: "Create a schedule from a spec's schedule:",
		Long: `Validate the spec (it must have 'schedule:'), type the inputs, resolve its tools
through the registry and create a Temporal Schedule that starts the agent on
the spec's cron in the spec's timezone. A fire that comes while the previous
scheduled run is still going is skipped.`,
		Example: `  agentctl schedule create -f specs/daily-tech-news.yaml
  agentctl schedule create -f spec.yaml --id nightly --input limit=5 --paused`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.File == "" {
				return usageErr("schedule create: no spec given (use -f spec.yaml)")
			}
			return runScheduleCreate(cmd.Context(), o)
		},
	}
	o.register(cmd)
	f := cmd.Flags()
	f.StringVar(&o.ID, "id", "", "schedule ID (also the prefix of its runs' agent IDs); default <spec-name>")
	f.BoolVar(&o.Paused, "paused", false, "create the schedule paused")
	return cmd
}

func runScheduleCreate(ctx context.Context, o *scheduleCreateOptions) error {
	plan, err := o.loadSpec(o.Streams.Err)
	if err != nil {
		return err
	}
	if plan.Schedule == nil {
		return usageErr("%s: spec %q has no schedule: (add schedule: {cron: ..., timezone: ...})", o.File, plan.Name)
	}
	inputs, err := o.inputs(plan)
	if err != nil {
		return err
	}
	id := o.ID
	if id == "" {
		id = plan.Name
	}
	if err := validateAgentID(id); err != nil {
		return err
	}

	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()

	tools, err := o.resolve(ctx, c, plan)
	if err != nil {
		return err
	}

	_, err = c.ScheduleClient().Create(ctx, scheduleOptionsFor(id, o.TaskQueue, plan, inputs, tools, o.Paused))
	if err != nil {
		if errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
			return serverErr("schedule %q already exists (delete it first, or pick another --id)", id)
		}
		if explained := missingSearchAttributes(err); explained != nil {
			return explained
		}
		return serverErr("create schedule %s: %w", id, err)
	}
	return report(o.Options, map[string]any{"id": id, "cron": plan.Schedule.Cron, "timezone": plan.Schedule.Timezone, "paused": o.Paused, "tools": tools},
		fmt.Sprintf("schedule: %s\ncron:     %s %s\ndescribe: agentctl schedule describe %s", id, plan.Schedule.Cron, tzName(plan.Schedule.Timezone), id))
}

// scheduleOptionsFor builds the Temporal Schedule of a resolved plan.
//
// The action's workflow ID is the schedule ID; Temporal appends the fire
// time, so each run is an agent <id>-<RFC3339 time>. AgentName is left
// unset on purpose: the workflow sets it to its own workflow ID at start,
// so a scheduled run is an agent like any other (inspect, logs, resume by
// that ID) and `list --filter name=<id>-*` finds a schedule's runs.
func scheduleOptionsFor(id, taskQueue string, plan *spec.Plan, inputs map[string]any, tools map[string]string, paused bool) client.ScheduleOptions {
	if taskQueue == "" {
		taskQueue = workflows.TaskQueue
	}
	return client.ScheduleOptions{
		ID: id,
		Spec: client.ScheduleSpec{
			CronExpressions: []string{plan.Schedule.TemporalCron},
			TimeZoneName:    plan.Schedule.Timezone,
		},
		Action: &client.ScheduleWorkflowAction{
			ID:        id,
			Workflow:  workflows.WorkflowName,
			Args:      []any{workflows.Input{Plan: *plan, Inputs: inputs}},
			TaskQueue: taskQueue,
			Memo:      agentMemo(plan, tools),
			TypedSearchAttributes: temporal.NewSearchAttributes(
				temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrSpec).ValueSet(plan.Name),
				temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrStatus).ValueSet(workflows.RunPending),
			),
			StaticSummary: fmt.Sprintf("%s %s (schedule %s)", plan.Name, plan.Version, id),
		},
		// Skip: two runs of the same agent writing the same outputs at once
		// would race, and a backlog of late runs is rarely wanted.
		Overlap:       enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		CatchupWindow: scheduleCatchupWindow,
		Paused:        paused,
		Memo: map[string]any{
			workflows.MemoSpecName:    plan.Name,
			workflows.MemoSpecVersion: plan.Version,
			scheduleMemoCron:          plan.Schedule.Cron,
			scheduleMemoTimezone:      plan.Schedule.Timezone,
		},
	}
}

func tzName(tz string) string {
	if tz == "" {
		return "(UTC)"
	}
	return "(" + tz + ")"
}

// scheduleView is the -o json document of describe and each row of list.
type scheduleView struct {
	ID            string           `json:"id"`
	Spec          string           `json:"spec,omitempty"`
	SpecVersion   string           `json:"spec_version,omitempty"`
	Cron          string           `json:"cron,omitempty"`
	Timezone      string           `json:"timezone,omitempty"`
	Paused        bool             `json:"paused"`
	Note          string           `json:"note,omitempty"`
	NextFireTimes []time.Time      `json:"next_fire_times"`
	RecentActions []scheduleAction `json:"recent_actions,omitempty"`
	Running       []string         `json:"running,omitempty"`
	NumActions    int              `json:"num_actions"`
	SkippedRuns   int              `json:"skipped_overlap"`
}

type scheduleAction struct {
	ScheduledAt time.Time `json:"scheduled_at"`
	StartedAt   time.Time `json:"started_at"`
	AgentID     string    `json:"agent_id,omitempty"`
	RunID       string    `json:"run_id,omitempty"`
}

func recentActions(rs []client.ScheduleActionResult) []scheduleAction {
	out := make([]scheduleAction, 0, len(rs))
	for _, r := range rs {
		a := scheduleAction{ScheduledAt: r.ScheduleTime.UTC(), StartedAt: r.ActualTime.UTC()}
		if w := r.StartWorkflowResult; w != nil {
			a.AgentID, a.RunID = w.WorkflowID, w.FirstExecutionRunID
		}
		out = append(out, a)
	}
	return out
}

func utcTimes(ts []time.Time) []time.Time {
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = t.UTC()
	}
	return out
}

func describeView(dc converter.DataConverter, id string, d *client.ScheduleDescription) scheduleView {
	v := scheduleView{
		ID:            id,
		Spec:          memoString(dc, d.Memo, workflows.MemoSpecName),
		SpecVersion:   memoString(dc, d.Memo, workflows.MemoSpecVersion),
		Cron:          memoString(dc, d.Memo, scheduleMemoCron),
		Timezone:      memoString(dc, d.Memo, scheduleMemoTimezone),
		Paused:        d.Schedule.State.Paused,
		Note:          d.Schedule.State.Note,
		NextFireTimes: utcTimes(d.Info.NextActionTimes),
		RecentActions: recentActions(d.Info.RecentActions),
		NumActions:    d.Info.NumActions,
		SkippedRuns:   d.Info.NumActionsSkippedOverlap,
	}
	if len(v.NextFireTimes) > scheduleNextTimes {
		v.NextFireTimes = v.NextFireTimes[:scheduleNextTimes]
	}
	for _, r := range d.Info.RunningWorkflows {
		v.Running = append(v.Running, r.WorkflowID)
	}
	return v
}

func newScheduleDescribeCmd(o *scheduleOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "describe ID",
		Short:   "Show a schedule: cron, timezone, state, next fire times, recent runs",
		Example: `  agentctl schedule describe daily-tech-news -o json`,
		Args:    argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSchedule(cmd.Context(), o, args[0], func(ctx context.Context, h client.ScheduleHandle, dc converter.DataConverter) error {
				d, err := h.Describe(ctx)
				if err != nil {
					return scheduleErr(args[0], "describe", err)
				}
				v := describeView(dc, args[0], d)
				if o.Output == "json" {
					return writeJSON(o.Streams.Out, v)
				}
				printScheduleView(o, v)
				return nil
			})
		},
	}
}

func printScheduleView(o *scheduleOptions, v scheduleView) {
	loc := time.UTC
	if v.Timezone != "" {
		if l, err := time.LoadLocation(v.Timezone); err == nil {
			loc = l
		}
	}
	tw := tabwriter.NewWriter(o.Streams.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\t%s\n", v.ID)
	fmt.Fprintf(tw, "SPEC\t%s %s\n", v.Spec, v.SpecVersion)
	fmt.Fprintf(tw, "CRON\t%s %s\n", v.Cron, tzName(v.Timezone))
	state := "active"
	if v.Paused {
		state = "paused"
	}
	if v.Note != "" {
		state += " (" + v.Note + ")"
	}
	fmt.Fprintf(tw, "STATE\t%s\n", state)
	fmt.Fprintf(tw, "RUNS\t%d started, %d skipped (overlap)\n", v.NumActions, v.SkippedRuns)
	for i, t := range v.NextFireTimes {
		label := ""
		if i == 0 {
			label = "NEXT"
		}
		fmt.Fprintf(tw, "%s\t%s\n", label, t.In(loc).Format("2006-01-02 15:04:05 MST Mon"))
	}
	for i, a := range v.RecentActions {
		label := ""
		if i == 0 {
			label = "RECENT"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", label, a.StartedAt.In(loc).Format(time.DateTime), a.AgentID)
	}
	_ = tw.Flush()
}

func newScheduleListCmd(o *scheduleOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the schedules of agents",
		Long: `List the schedules that start agents. Schedule listing comes from Temporal
visibility, so a schedule created a moment ago may take a second to show.`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runScheduleList(cmd.Context(), o)
		},
	}
}

func runScheduleList(ctx context.Context, o *scheduleOptions) error {
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	it, err := c.ScheduleClient().List(ctx, client.ScheduleListOptions{})
	if err != nil {
		return serverErr("list schedules: %w", err)
	}
	rows := []scheduleView{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return serverErr("list schedules: %w", err)
		}
		// Only agent schedules: other schedules may share the namespace.
		if e.WorkflowType.Name != workflows.WorkflowName {
			continue
		}
		v := scheduleView{
			ID:            e.ID,
			Spec:          memoString(payloadConverter(c), e.Memo, workflows.MemoSpecName),
			SpecVersion:   memoString(payloadConverter(c), e.Memo, workflows.MemoSpecVersion),
			Cron:          memoString(payloadConverter(c), e.Memo, scheduleMemoCron),
			Timezone:      memoString(payloadConverter(c), e.Memo, scheduleMemoTimezone),
			Paused:        e.Paused,
			Note:          e.Note,
			NextFireTimes: utcTimes(e.NextActionTimes),
			RecentActions: recentActions(e.RecentActions),
		}
		rows = append(rows, v)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ID < rows[j].ID })
	if o.Output == "json" {
		return writeJSON(o.Streams.Out, rows)
	}
	tw := tabwriter.NewWriter(o.Streams.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSPEC\tCRON\tTIMEZONE\tSTATE\tNEXT (UTC)")
	for _, r := range rows {
		state, next := "active", "-"
		if r.Paused {
			state = "paused"
		}
		if len(r.NextFireTimes) > 0 {
			next = r.NextFireTimes[0].Format(time.DateTime)
		}
		tz := r.Timezone
		if tz == "" {
			tz = "UTC"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Spec, r.Cron, tz, state, next)
	}
	return tw.Flush()
}

func newScheduleTriggerCmd(o *scheduleOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "trigger ID",
		Short: "Start a run of a schedule now",
		Long: `Start one run of the schedule now, whatever its cron and even when it is
paused. The run appears under recent actions in 'schedule describe'.`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSchedule(cmd.Context(), o, args[0], func(ctx context.Context, h client.ScheduleHandle, dc converter.DataConverter) error {
				// Overlap ALLOW_ALL: an explicit trigger is a request to run
				// now, not subject to the schedule's skip policy.
				if err := h.Trigger(ctx, client.ScheduleTriggerOptions{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL}); err != nil {
					return scheduleErr(args[0], "trigger", err)
				}
				return report(o.Options, map[string]any{"id": args[0], "triggered": true},
					fmt.Sprintf("schedule %s triggered (see agentctl schedule describe %s)", args[0], args[0]))
			})
		},
	}
}

func newSchedulePauseCmd(o *scheduleOptions, pause bool) *cobra.Command {
	var note string
	verb, short := "unpause", "Resume a paused schedule"
	if pause {
		verb, short = "pause", "Pause a schedule (no runs until unpaused)"
	}
	cmd := &cobra.Command{
		Use:   verb + " ID",
		Short: short,
		Args:  argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSchedule(cmd.Context(), o, args[0], func(ctx context.Context, h client.ScheduleHandle, dc converter.DataConverter) error {
				var err error
				if pause {
					if note == "" {
						note = "paused by agentctl"
					}
					err = h.Pause(ctx, client.SchedulePauseOptions{Note: note})
				} else {
					if note == "" {
						note = "unpaused by agentctl"
					}
					err = h.Unpause(ctx, client.ScheduleUnpauseOptions{Note: note})
				}
				if err != nil {
					return scheduleErr(args[0], verb, err)
				}
				return report(o.Options, map[string]any{"id": args[0], "paused": pause},
					fmt.Sprintf("schedule %s %sd", args[0], verb))
			})
		},
	}
	cmd.Flags().StringVar(&note, "note", "", "why (shown by describe)")
	return cmd
}

func newScheduleDeleteCmd(o *scheduleOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a schedule (its runs are kept)",
		Args:  argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSchedule(cmd.Context(), o, args[0], func(ctx context.Context, h client.ScheduleHandle, dc converter.DataConverter) error {
				if err := h.Delete(ctx); err != nil {
					return scheduleErr(args[0], "delete", err)
				}
				return report(o.Options, map[string]any{"id": args[0], "deleted": true},
					fmt.Sprintf("schedule %s deleted", args[0]))
			})
		},
	}
}

// withSchedule dials and runs fn on the handle of schedule id.
func withSchedule(ctx context.Context, o *scheduleOptions, id string, fn func(context.Context, client.ScheduleHandle, converter.DataConverter) error) error {
	if strings.TrimSpace(id) == "" {
		return usageErr("schedule ID is empty")
	}
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(ctx, c.ScheduleClient().GetHandle(ctx, id), payloadConverter(c))
}

// scheduleErr maps a schedule call's error: unknown schedule → a clear
// exit 1, anything else → exit 1 with context.
func scheduleErr(id, op string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return serverErr("schedule %q not found", id)
	}
	return serverErr("%s schedule %s: %w", op, id, err)
}
