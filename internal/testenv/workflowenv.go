package testenv

import (
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
)

// WorkflowDeadlockTimeout replaces the SDK's 1 s deadlock detector in
// testsuite environments. The detector fails a workflow task whose
// goroutine does not yield within that time; on a loaded 2-core CI
// machine a scheduler stall alone exceeds 1 s (seen: TestApprovalApproved
// failing with "Potential deadlock detected" while nothing was blocked).
// A real deadlock still fails the test, after this long.
const WorkflowDeadlockTimeout = 30 * time.Second

// WorkflowEnv returns ts's workflow test environment with the deadlock
// detector set to WorkflowDeadlockTimeout.
func WorkflowEnv(ts *testsuite.WorkflowTestSuite) *testsuite.TestWorkflowEnvironment {
	env := ts.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: WorkflowDeadlockTimeout})
	return env
}
