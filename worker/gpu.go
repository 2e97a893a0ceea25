package worker

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/agentflow/agentflow/activities"
)

// GPU serving (Config.GPUs): how many GPU steps this worker takes at once
// from its run queue's GPU task queue (workflows.GPUTaskQueue).
const (
	// GPUsAuto: the GPUs the host has when its Docker daemon has the
	// NVIDIA runtime (counted with nvidia-smi); on a host without it,
	// none, except under --gpu-policy ignore, where GPU steps run without
	// a GPU and the worker serves them like other steps.
	GPUsAuto = 0
	// GPUsNone: this worker never polls the GPU queue.
	GPUsNone = -1
)

// gpuSlots decides how many GPU steps the worker runs at once (0: it does
// not poll the GPU queue). declared is Config.GPUs; count asks the host.
func gpuSlots(declared int, runtime bool, policy activities.GPUPolicy, maxSteps int, count func() (int, error)) (int, error) {
	switch {
	case declared == GPUsNone:
		return 0, nil
	case declared > 0:
		if !runtime && policy != activities.GPUPolicyIgnore {
			return 0, fmt.Errorf("--gpus %d, but the Docker daemon has no GPU runtime (nvidia): GPU steps would all fail; "+
				"start with --gpu-policy ignore to run them without a GPU", declared)
		}
		return declared, nil
	case runtime:
		n, err := count()
		if err != nil || n < 1 {
			// The runtime is there but the devices cannot be counted:
			// one at a time is never an overcommit.
			return 1, err
		}
		return n, nil
	case policy == activities.GPUPolicyIgnore:
		return maxSteps, nil
	}
	return 0, nil
}

// countNVIDIAGPUs counts the host's GPUs with `nvidia-smi -L`.
func countNVIDIAGPUs() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nvidia-smi", "-L").Output()
	if err != nil {
		return 0, fmt.Errorf("count GPUs with nvidia-smi -L: %w", err)
	}
	return parseNVIDIASMIList(out), nil
}

// parseNVIDIASMIList counts "GPU <n>: …" lines of `nvidia-smi -L`.
func parseNVIDIASMIList(out []byte) int {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if strings.HasPrefix(strings.TrimSpace(sc.Text()), "GPU ") {
			n++
		}
	}
	return n
}
