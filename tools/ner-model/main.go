// Command ner-model is the complaint-handler demo's stand-in for an NER
// model: rule-based extraction of the customer id, the disputed amount and
// the issue type from an email body. Deterministic, so runs are replayable.
package main

import (
	"context"
	_ "embed"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

//go:embed VERSION
var version string

var tool = toolkit.Tool{
	Name:    "ner-model",
	Version: version,
	Summary: "extract customer id, amount and issue type from text (rule-based stand-in)",
	Usage: `Input:  {"text": "..."}
Output: {"customer_id": "C-7890"|null, "amount": 129.99|null, "currency": "USD",
         "issue_type": "billing_error"|"technical_issue"|"shipping_issue"|"account_issue"|"general_inquiry",
         "entities": [{"type", "text", "start", "end"}]}`,
}

type input struct {
	Text toolkit.Text `json:"text"`
}

func main() { toolkit.Main(tool, handle) }

func handle(_ context.Context, env toolkit.Env, in input) (any, error) {
	if in.Text == "" {
		return nil, toolkit.BadInput("text is required")
	}
	res := Extract(string(in.Text))
	env.Log.Info("extracted", "issue_type", res.IssueType, "entities", len(res.Entities))
	return res, nil
}
