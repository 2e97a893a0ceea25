package gc

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/agentflow/agentflow/workflows"
)

// Temporal answers Runs from a Temporal namespace: visibility for the list,
// each run's first history event for its input, schedule descriptions for
// their latest runs.
type Temporal struct {
	Client    client.Client
	Namespace string
	// Converter decodes workflow inputs (nil: the SDK's default); a client
	// with a payload codec passes the converter that wraps it.
	Converter converter.DataConverter
}

var _ Runs = (*Temporal)(nil)

// List implements Runs.
func (t *Temporal) List(ctx context.Context, since time.Time) ([]Run, error) {
	q := fmt.Sprintf("WorkflowType = '%s'", workflows.WorkflowName)
	if !since.IsZero() {
		q += fmt.Sprintf(" AND StartTime >= '%s'", since.UTC().Format(time.RFC3339Nano))
	}
	var out []Run
	var token []byte
	for {
		resp, err := t.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: t.Namespace, Query: q, PageSize: 1000, NextPageToken: token,
		})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.GetExecutions() {
			r := Run{RunKey: RunKey{AgentID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId()}}
			r.Open = e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
			if !r.Open {
				r.CloseTime = e.GetCloseTime().AsTime()
			}
			out = append(out, r)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// Input implements Runs.
func (t *Temporal) Input(ctx context.Context, run RunKey) (*workflows.Input, error) {
	it := t.Client.GetWorkflowHistory(ctx, run.AgentID, run.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return nil, fmt.Errorf("history of %s is empty", run.AgentID)
	}
	ev, err := it.Next()
	if err != nil {
		return nil, err
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return nil, fmt.Errorf("first history event is %s, not WorkflowExecutionStarted", ev.GetEventType())
	}
	payloads := attrs.GetInput().GetPayloads()
	if len(payloads) != 1 {
		return nil, fmt.Errorf("agent input: want 1 payload, got %d", len(payloads))
	}
	dc := t.Converter
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	var in workflows.Input
	if err := dc.FromPayload(payloads[0], &in); err != nil {
		return nil, fmt.Errorf("decode agent input: %w", err)
	}
	return &in, nil
}

// ScheduleLatest implements Runs: of every agent schedule, the run its most
// recent action started.
func (t *Temporal) ScheduleLatest(ctx context.Context) ([]RunKey, error) {
	it, err := t.Client.ScheduleClient().List(ctx, client.ScheduleListOptions{})
	if err != nil {
		return nil, err
	}
	var out []RunKey
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, err
		}
		if e.WorkflowType.Name != workflows.WorkflowName {
			continue
		}
		// The list entry comes from visibility and may lag; the
		// description is the schedule's own state.
		d, err := t.Client.ScheduleClient().GetHandle(ctx, e.ID).Describe(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe schedule %s: %w", e.ID, err)
		}
		var newest *client.ScheduleActionResult
		for i := range d.Info.RecentActions {
			a := &d.Info.RecentActions[i]
			if a.StartWorkflowResult != nil && (newest == nil || a.ActualTime.After(newest.ActualTime)) {
				newest = a
			}
		}
		if newest != nil {
			out = append(out, RunKey{AgentID: newest.StartWorkflowResult.WorkflowID, RunID: newest.StartWorkflowResult.FirstExecutionRunID})
		}
	}
	return out, nil
}

// Retention is the namespace's history retention: a closed run older than
// it is gone from Temporal, and gc can no longer attribute its objects.
func (t *Temporal) Retention(ctx context.Context) (time.Duration, error) {
	resp, err := t.Client.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: t.Namespace})
	if err != nil {
		return 0, err
	}
	return resp.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(), nil
}
