package metrics

// TemporalSDK are the Temporal SDK metric families agentflow's dashboard
// and alerts read, as this worker exports them (timers as histograms in
// seconds, counters without a _total suffix: internal/metrics/temporal.go).
// The SDK's own constants live in go.temporal.io/sdk/internal/common/metrics,
// which cannot be imported, so the names used are copied here once; an e2e
// test (tests/engine_e2e_test.go, "metrics recorded") checks a real worker
// emits every one of them, so an SDK rename fails a test instead of
// blanking a panel.
var TemporalSDK = []string{
	"temporal_activity_schedule_to_start_latency",      // timer: a step attempt's wait in the task queue
	"temporal_activity_execution_latency",              // timer
	"temporal_workflow_task_schedule_to_start_latency", // timer: a run's wait for a workflow worker
	"temporal_workflow_task_execution_latency",         // timer
	"temporal_worker_task_slots_available",             // gauge, by worker_type
	"temporal_worker_task_slots_used",                  // gauge, by worker_type
	"temporal_num_pollers",                             // gauge, by poller_type
}
