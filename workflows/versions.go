package workflows

// Workflow versioning discipline.
//
// AgentWorkflow runs for hours or days (approval steps, retries with
// backoff) and is replayed from history whenever a worker picks a run up
// again, so every change to the commands it emits (activities, timers,
// markers, upserts, their order) must keep old histories replaying:
//
//  1. Wrap the new behaviour in workflow.GetVersion(ctx, <changeID>,
//     <oldest still supported>, <new max>) and keep the old branch until no
//     open run can reach it.
//  2. Add the change ID to the table below with a one-line description.
//  3. Record a new history (see testdata/README.md) so the replay test pins
//     the new behaviour too; never delete histories of supported versions.
//
// Plan interpretation changes also bump spec.PlanSchemaVersion; the workflow
// refuses a Plan whose schema version it does not know.
//
// A change ID whose minimum and maximum version are equal branches on
// nothing; its GetVersion call may then be removed (the SDK skips a version
// marker, and its TemporalChangeVersion upsert, that no call reads), and
// every run saves the two events. Keep its row below, marked retired.
//
// Change IDs:
//
//	agentflow-scheduler v1  initial DAG scheduler: spec-order readiness passes,
//	                        one activity per tool step, approval via Await.
//	                        Retired (DECISIONS 245): never branched (min = max
//	                        = 1); histories recorded with its marker replay
//	                        with the marker skipped (replay test).
//	changeInfraRetries  v1  the workflow runs every attempt of a tool step
//	                        itself (one RunStep execution each, numbered by
//	                        StepRequest.Attempt) and retries tool failures on
//	                        `retries` and infrastructure failures on their own
//	                        budget (attempts.go). DefaultVersion: one RunStep
//	                        execution per step with Temporal's RetryPolicy
//	                        counting every failure against `retries`.
//	                    v2  v1, and the run's end is settled by a local
//	                        activity (RunEnded: metrics, log, whether the
//	                        worker has webhooks); RunFinished is scheduled
//	                        only to deliver webhooks (v1: it always runs).
//	                        Carried by this change ID, not a new one: a new
//	                        GetVersion costs every run a marker and a search
//	                        attribute upsert, events v2 exists to save.
//
// It is read once, at workflow start, so a run takes one branch for its
// whole life.
const (
	changeInfraRetries        = "agentflow-infra-retries"
	changeInfraRetriesVersion = 2

	// The changeInfraRetries version of each behaviour it gates.
	versionInfraRetries  = 1
	versionRunEndedLocal = 2
)
