package activities

import (
	"fmt"
	"strings"

	"github.com/agentflow/agentflow/internal/capacity"
)

// GPUPolicy says what RunStep does with a step that requests GPUs
// (resources.gpu) when the worker's sandbox host has no GPU runtime.
type GPUPolicy string

const (
	// GPUPolicyRequire fails such a step at once, without retries
	// (PolicyViolation): a step that asked for a GPU and silently runs on
	// the CPU can take hours or behave differently, so the default is to
	// say so and let the operator route it to a GPU worker.
	GPUPolicyRequire GPUPolicy = "require"
	// GPUPolicyIgnore runs the step without a GPU, logs a warning and tells
	// the tool through EnvGPUIgnored, so it can pick a CPU code path. For
	// development machines and CI, where the seed's GPU steps must still run.
	GPUPolicyIgnore GPUPolicy = "ignore"
)

// EnvGPUIgnored is set to "1" in the tool's environment when the step
// requested GPUs and runs without them under GPUPolicyIgnore.
const EnvGPUIgnored = "AGENTFLOW_GPU_IGNORED"

// EnvGPUDevices is set in the tool's environment to the worker's GPU
// devices the attempt holds, comma-separated, as the worker names them
// (indexes or UUIDs on the host: inside the sandbox the runtime numbers
// its devices from 0). Also under GPUPolicyIgnore, where the sandbox has
// none of them: the assignment stands, so scheduling is the same as on a
// GPU host. Not NVIDIA_VISIBLE_DEVICES: that variable tells the NVIDIA
// runtime which devices to attach, and here it is only a record.
const EnvGPUDevices = "AGENTFLOW_GPU_DEVICES"

// ParseGPUPolicy parses a --gpu-policy value; "" is GPUPolicyRequire.
func ParseGPUPolicy(s string) (GPUPolicy, error) {
	switch p := GPUPolicy(strings.ToLower(strings.TrimSpace(s))); p {
	case "":
		return GPUPolicyRequire, nil
	case GPUPolicyRequire, GPUPolicyIgnore:
		return p, nil
	default:
		return "", fmt.Errorf("invalid gpu policy %q: want %q or %q", s, GPUPolicyRequire, GPUPolicyIgnore)
	}
}

// gpuRequest decides how many GPUs the sandbox gets. ignored reports that
// the step asked for GPUs and runs without them.
func (a *Activities) gpuRequest(req StepRequest) (gpus int, ignored bool, err *stepError) {
	want := req.Resources.GPUs
	if want == 0 || a.opts.GPUAvailable {
		return want, false, nil
	}
	if a.opts.GPUPolicy == GPUPolicyIgnore {
		return 0, true, nil
	}
	return 0, false, failf(ErrTypePolicy,
		"step %s requests %s but this worker's Docker host has no GPU runtime (no nvidia runtime registered with the daemon): "+
			"run it on a worker with GPUs, or start this worker with --gpu-policy ignore to run GPU steps without a GPU",
		req.StepID, gpuCount(want))
}

// gpuTooMany is the failure of a step that needs more GPUs than this
// worker has: PolicyViolation, not retried (another attempt would land on
// a worker of the same GPU queue, which is configured alike).
func gpuTooMany(stepID, worker string, e *capacity.TooLargeError) *stepError {
	return failf(ErrTypePolicy, "step %s requests %s but worker %s has %s (worker --gpus): "+
		"run it on a task queue whose workers have enough GPUs, or lower its resources.gpu",
		stepID, gpuCount(e.Step.GPUs), worker, gpuCount(e.Budget.GPUs))
}

func gpuCount(n int) string {
	switch {
	case n < 0:
		return "all GPUs"
	case n == 1:
		return "1 GPU"
	default:
		return fmt.Sprintf("%d GPUs", n)
	}
}
