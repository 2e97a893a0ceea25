package bench

import (
	"context"

	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/workflows"
)

// startAgent starts an AgentWorkflow run of plan under id on queue with the
// memo and search attributes `agentctl run` sets (internal/cli/engine's
// startAgent, whose other options — ID conflict policy, summary — a
// benchmark does not need).
func startAgent(ctx context.Context, c tclient.Client, queue, id string, plan spec.Plan) (tclient.WorkflowRun, error) {
	return c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{
		ID: id, TaskQueue: queue,
		Memo: map[string]any{workflows.MemoSpecName: plan.Name, workflows.MemoSpecVersion: plan.Version},
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrAgentName).ValueSet(id),
			temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrSpec).ValueSet(plan.Name),
			temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrStatus).ValueSet(workflows.RunPending),
		),
	}, workflows.WorkflowName, workflows.Input{Plan: plan})
}
