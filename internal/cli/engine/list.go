package engine

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/agentflow/agentflow/workflows"
)

type listOptions struct {
	*Options
	Filters []string
	Limit   int

	dial dialer
}

func newListCmd(g *Options) *cobra.Command {
	o := &listOptions{Options: g, dial: dialerFor(g)}
	cmd := &cobra.Command{
		Use: "list [--filter name=GLOB|status=S|spec=N]...",
		Long: `List agent runs from Temporal visibility (the AgentName, AgentSpec and
AgentStatus search attributes), newest first: one row per run.

Filters: name=GLOB matches the agent ID (a prefix pattern like news-* is
pushed to the server as STARTS_WITH, any other glob is matched here),
status=S one of PENDING, RUNNING, SUCCEEDED, FAILED, CANCELED, spec=N the
spec name. The same key given twice means either value; different keys must
all match.`,
		Example: `  agentctl list
  agentctl list --filter name=news-* --filter status=FAILED
  agentctl list --filter spec=daily-tech-news -o json`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runList(cmd.Context(), o)
		},
	}
	cmd.Flags().StringArrayVar(&o.Filters, "filter", nil, "name=GLOB, status=S or spec=N (repeatable)")
	cmd.Flags().IntVar(&o.Limit, "limit", 200, "at most this many runs (0 = all)")
	return cmd
}

// listQuery is a visibility query plus the globs only the client can apply.
type listQuery struct {
	Query string
	Globs []string // name globs matched client-side (any of them)
}

var runStatuses = []string{workflows.RunPending, workflows.RunRunning, workflows.RunSucceeded, workflows.RunFailed, workflows.RunCanceled}

// buildListQuery translates --filter flags into a visibility query.
func buildListQuery(filters []string) (listQuery, error) {
	byKey := map[string][]string{}
	for _, f := range filters {
		k, v, ok := strings.Cut(f, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		if !ok || v == "" {
			return listQuery{}, usageErr("--filter %q: want name=GLOB, status=S or spec=N", f)
		}
		if strings.ContainsAny(v, "'\"\\") {
			return listQuery{}, usageErr("--filter %q: quotes and backslashes are not allowed", f)
		}
		switch k {
		case "name", "spec":
		case "status":
			v = strings.ToUpper(v)
			if !contains(runStatuses, v) {
				return listQuery{}, usageErr("--filter status=%s: want one of %s", v, strings.Join(runStatuses, ", "))
			}
		default:
			return listQuery{}, usageErr("--filter %q: unknown key %q (want name, status or spec)", f, k)
		}
		if !contains(byKey[k], v) {
			byKey[k] = append(byKey[k], v)
		}
	}
	clauses := []string{fmt.Sprintf("WorkflowType = '%s'", workflows.WorkflowName)}
	if specs := byKey["spec"]; len(specs) > 0 {
		clauses = append(clauses, inClause(workflows.SearchAttrSpec, specs))
	}
	if sts := byKey["status"]; len(sts) > 0 {
		clauses = append(clauses, inClause(workflows.SearchAttrStatus, sts))
	}
	var q listQuery
	if names := byKey["name"]; len(names) > 0 {
		// Server-side only when every glob is exact or a plain prefix;
		// otherwise fetch by the other clauses and match all globs here.
		var parts []string
		for _, g := range names {
			if p, ok := prefixGlob(g); ok {
				parts = append(parts, fmt.Sprintf("%s STARTS_WITH '%s'", workflows.SearchAttrAgentName, p))
			} else if !hasGlobMeta(g) {
				parts = append(parts, fmt.Sprintf("%s = '%s'", workflows.SearchAttrAgentName, g))
			} else {
				parts = nil
				break
			}
		}
		if parts != nil {
			clauses = append(clauses, orGroup(parts))
		} else {
			for _, g := range names {
				if _, err := path.Match(g, ""); err != nil {
					return listQuery{}, usageErr("--filter name=%s: %v", g, err)
				}
			}
			q.Globs = names
		}
	}
	q.Query = strings.Join(clauses, " AND ")
	return q, nil
}

// prefixGlob reports whether g is "literal*" and returns the literal.
func prefixGlob(g string) (string, bool) {
	if !strings.HasSuffix(g, "*") {
		return "", false
	}
	p := strings.TrimSuffix(g, "*")
	if p == "" || hasGlobMeta(p) {
		return "", false
	}
	return p, true
}

func hasGlobMeta(s string) bool { return strings.ContainsAny(s, "*?[") }

func inClause(key string, vals []string) string {
	if len(vals) == 1 {
		return fmt.Sprintf("%s = '%s'", key, vals[0])
	}
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = "'" + v + "'"
	}
	return fmt.Sprintf("%s IN (%s)", key, strings.Join(q, ", "))
}

func orGroup(parts []string) string {
	if len(parts) == 1 {
		return parts[0]
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// matchAny reports whether id matches one of the globs (none = all).
func matchAny(globs []string, id string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, id); ok {
			return true
		}
	}
	return false
}

func runList(ctx context.Context, o *listOptions) error {
	q, err := buildListQuery(o.Filters)
	if err != nil {
		return err
	}
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var rows []agentSummary
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace:     o.Namespace,
			PageSize:      100,
			NextPageToken: token,
			Query:         q.Query,
		})
		if err != nil {
			return serverErr("list agents (query %q): %w", q.Query, err)
		}
		for _, info := range resp.GetExecutions() {
			s := summarize(payloadConverter(c), info)
			if matchAny(q.Globs, s.ID) {
				rows = append(rows, s)
			}
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 || (o.Limit > 0 && len(rows) >= o.Limit) {
			break
		}
	}
	// Visibility returns newest first already; make it explicit and stable.
	sort.SliceStable(rows, func(i, j int) bool { return timeOrZero(rows[i].StartedAt).After(timeOrZero(rows[j].StartedAt)) })
	if o.Limit > 0 && len(rows) > o.Limit {
		rows = rows[:o.Limit]
	}
	if o.Output == "json" {
		if rows == nil {
			rows = []agentSummary{}
		}
		return writeJSON(o.Streams.Out, rows)
	}
	tw := tabwriter.NewWriter(o.Streams.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSPEC\tSTATUS\tSTARTED\tCLOSED")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Spec, r.Status, fmtTime(r.StartedAt), fmtTime(r.ClosedAt))
	}
	return tw.Flush()
}

func timeOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// fmtTime prints times in local time, to the second; "-" for none.
func fmtTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}
