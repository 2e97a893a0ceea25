// Command jira-creator is the complaint-handler demo's stand-in for a Jira
// client: the sandbox has no network, so the ticket is written as JSON into
// /workspace/tickets/, where the checkpoint carries it out of the sandbox.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

//go:embed VERSION
var version string

var tool = toolkit.Tool{
	Name:    "jira-creator",
	Version: version,
	Summary: "create a ticket (offline stand-in writing /workspace/tickets/<KEY>.json)",
	Usage: `Input:  {"summary": "...", "description": "...", "project": "SUP", "priority": "High", "labels": ["billing"]}
Output: {"ticket_id": "SUP-1", "path": "tickets/SUP-1.json", "status": "Open"}`,
}

type input struct {
	Summary     toolkit.Text `json:"summary"`
	Description toolkit.Text `json:"description"`
	Project     string       `json:"project"`
	Priority    string       `json:"priority"`
	Labels      []string     `json:"labels"`
}

// Ticket is the file written into the workspace.
type Ticket struct {
	Key         string   `json:"key"`
	Project     string   `json:"project"`
	Summary     string   `json:"summary"`
	Description string   `json:"description"`
	Priority    string   `json:"priority"`
	Labels      []string `json:"labels"`
	Status      string   `json:"status"`
	Created     string   `json:"created"`
	StepID      string   `json:"step_id,omitempty"`
}

var projectRe = regexp.MustCompile(`^[A-Z][A-Z0-9]{1,9}$`)

const maxSummary = 255 // Jira's own limit on summary length

func main() { toolkit.Main(tool, handle) }

func handle(_ context.Context, env toolkit.Env, in input) (any, error) {
	t, err := NewTicket(in, time.Now().UTC())
	if err != nil {
		return nil, err
	}
	t.StepID = env.StepID
	root, err := env.OpenWorkspace()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// The key is the next free number in the workspace, so a re-run of the
	// step on a restored workspace reuses nothing and overwrites nothing.
	path, err := toolkit.NextName(root, "tickets", t.Project+"-", ".json")
	if err != nil {
		return nil, err
	}
	t.Key = strings.TrimSuffix(strings.TrimPrefix(path, "tickets/"), ".json")
	data, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode ticket: %w", err)
	}
	if err := toolkit.WriteFile(root, path, append(data, '\n')); err != nil {
		return nil, err
	}
	env.Log.Info("ticket created", "ticket_id", t.Key, "path", path)
	return map[string]any{"ticket_id": t.Key, "path": path, "status": t.Status, "project": t.Project}, nil
}

// NewTicket validates the input and fills defaults.
func NewTicket(in input, now time.Time) (Ticket, error) {
	summary := strings.Join(strings.Fields(string(in.Summary)), " ")
	if summary == "" {
		return Ticket{}, toolkit.BadInput("summary is required")
	}
	if len(summary) > maxSummary {
		summary = summary[:maxSummary-1] + "…"
	}
	project := strings.ToUpper(strings.TrimSpace(in.Project))
	if project == "" {
		project = "SUP"
	}
	if !projectRe.MatchString(project) {
		return Ticket{}, toolkit.BadInput("project %q is not a Jira project key", in.Project)
	}
	priority := strings.TrimSpace(in.Priority)
	switch strings.ToLower(priority) {
	case "":
		priority = "High"
	case "highest", "high", "medium", "low", "lowest":
		priority = strings.ToUpper(priority[:1]) + strings.ToLower(priority[1:])
	default:
		return Ticket{}, toolkit.BadInput("priority %q is not one of Highest, High, Medium, Low, Lowest", in.Priority)
	}
	labels := in.Labels
	if labels == nil {
		labels = []string{}
	}
	return Ticket{
		Project: project, Summary: summary, Description: string(in.Description),
		Priority: priority, Labels: labels, Status: "Open", Created: now.Format(time.RFC3339),
	}, nil
}
