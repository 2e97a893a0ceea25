package engine

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/workflows"
)

// markGPUWaits shows a GPU step whose attempt no worker has taken yet as
// pending, with the reason: the workflow counts a step as running from the
// moment it schedules the attempt, but on the GPU task queue the attempt
// may wait for a free GPU worker for a long time, and "running" would hide
// that. Only Temporal knows whether the task was taken (the pending
// activity's state); the step it belongs to is in the scheduled event's
// input. Best effort: inspect shows the workflow's view when this fails.
func markGPUWaits(ctx context.Context, c client.Client, namespace string, st *workflows.Status) {
	running := false
	for _, r := range st.StepHistory {
		running = running || r.Status == workflows.StepRunning
	}
	if !running {
		return
	}
	desc, err := c.DescribeWorkflowExecution(ctx, st.ID, st.RunID)
	if err != nil {
		return
	}
	waiting := map[string]bool{} // activity IDs not taken by any worker
	for _, pa := range desc.GetPendingActivities() {
		if pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_SCHEDULED {
			waiting[pa.GetActivityId()] = true
		}
	}
	if len(waiting) == 0 {
		return
	}
	steps := map[string]string{} // step ID → GPU queue it waits on
	it := c.GetWorkflowHistory(ctx, st.ID, st.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return
		}
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil || !waiting[a.GetActivityId()] || len(a.GetInput().GetPayloads()) != 1 {
			continue
		}
		var req activities.StepRequest
		if payloadConverter(c).FromPayload(a.GetInput().GetPayloads()[0], &req) != nil {
			continue
		}
		if q := a.GetTaskQueue().GetName(); req.Resources.GPUs != 0 && q != "" {
			steps[req.StepID] = q
		}
	}
	reasons := map[string]string{}
	for i := range st.StepHistory {
		r := &st.StepHistory[i]
		q, ok := steps[r.ID]
		if !ok || r.Status != workflows.StepRunning {
			continue
		}
		if _, seen := reasons[q]; !seen {
			reasons[q] = gpuWaitReason(ctx, c, namespace, q)
		}
		r.Status, r.Reason = workflows.StepPending, reasons[q]
	}
}

// gpuWaitReason says why a GPU step waits: no worker polls its queue, or
// every GPU of those that do is busy.
func gpuWaitReason(ctx context.Context, c client.Client, namespace, queue string) string {
	resp, err := c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
		Namespace:     namespace,
		TaskQueue:     &taskqueuepb.TaskQueue{Name: queue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
	})
	switch {
	case err != nil:
		return fmt.Sprintf("waiting for a GPU worker (task queue %s)", queue)
	case len(resp.GetPollers()) == 0:
		return fmt.Sprintf("waiting for a GPU worker: none polls task queue %s (start one with agentctl worker --gpus N)", queue)
	}
	return fmt.Sprintf("waiting for a free GPU: every GPU of the %d worker(s) on task queue %s is busy", len(resp.GetPollers()), queue)
}

// gpuQueueChecks are the dry run's lines for GPU steps: whether any worker
// polls the run's GPU task queue. Without one the step would not fail, it
// would wait (DECISIONS 219), which a dry run reports as a failed check.
func gpuQueueChecks(ctx context.Context, c client.Client, namespace, taskQueue string, plan *spec.Plan) []activities.PreflightCheck {
	if taskQueue == "" {
		taskQueue = workflows.TaskQueue
	}
	queue := workflows.GPUTaskQueue(taskQueue)
	var checks []activities.PreflightCheck
	pollers := -1
	for _, ps := range plan.Steps {
		if ps.Resources.GPUs == 0 {
			continue
		}
		if pollers < 0 {
			resp, err := c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
				Namespace:     namespace,
				TaskQueue:     &taskqueuepb.TaskQueue{Name: queue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
				TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
			})
			if err != nil {
				return append(checks, activities.PreflightCheck{Kind: activities.CheckGPU, Step: ps.ID, Target: queue,
					Status: activities.CheckFail, Reason: fmt.Sprintf("cannot ask Temporal who polls %s: %v", queue, err)})
			}
			pollers = len(resp.GetPollers())
		}
		ck := activities.PreflightCheck{Kind: activities.CheckGPU, Step: ps.ID, Target: queue, Status: activities.CheckOK,
			Reason: fmt.Sprintf("%d worker(s) serve GPU steps", pollers)}
		if pollers == 0 {
			ck.Status, ck.Reason = activities.CheckFail,
				"no worker serves GPU steps: the step would wait until one polls "+queue+" (agentctl worker --gpus N)"
		}
		checks = append(checks, ck)
	}
	return checks
}
