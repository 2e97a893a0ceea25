package worker

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/exechost"
)

// GPU serving (Config.GPUs): how many GPU steps this worker takes at once
// from its run queue's GPU task queue (workflows.GPUTaskQueue).
const (
	// GPUsAuto: the GPUs the host has when its Docker daemon has the
	// NVIDIA runtime (listed with nvidia-smi); on a host without it,
	// none, except under --gpu-policy ignore, where GPU steps run without
	// a GPU and the worker serves them like other steps.
	GPUsAuto = 0
	// GPUsNone: this worker never polls the GPU queue.
	GPUsNone = -1
)

// gpuServing is what a worker serves of the GPU queue: slots GPU steps at
// once (0: it does not poll it), each pinned to its own devices of
// devices (none: the runtime picks, as `--gpus N` does).
type gpuServing struct {
	slots   int
	devices []string
}

// gpuServe decides the worker's GPU serving. declared is Config.GPUs,
// listed Config.GPUDevices (it wins); list asks the host for its GPUs.
// Declared devices are pinned even without a runtime (--gpu-policy
// ignore): the sandbox gets none, but steps are scheduled as on the GPU
// host, and which device each held is observable.
func gpuServe(declared int, listed []string, runtime bool, policy activities.GPUPolicy, maxSteps int, list func() ([]string, error)) (gpuServing, error) {
	if len(listed) > 0 {
		declared = len(listed)
	}
	switch {
	case declared == GPUsNone:
		return gpuServing{}, nil
	case declared > 0:
		if !runtime && policy != activities.GPUPolicyIgnore {
			return gpuServing{}, fmt.Errorf("--gpus %d, but the Docker daemon has no GPU runtime (nvidia): GPU steps would all fail; "+
				"start with --gpu-policy ignore to run them without a GPU", declared)
		}
		if len(listed) == 0 {
			listed = indexDevices(declared)
		}
		return gpuServing{slots: declared, devices: listed}, nil
	case runtime:
		ids, err := list()
		if err != nil || len(ids) == 0 {
			// The runtime is there but the devices cannot be listed: one
			// at a time is never an overcommit, and without IDs there is
			// nothing to pin.
			if err == nil {
				err = fmt.Errorf("nvidia-smi -L lists no GPU")
			}
			return gpuServing{slots: 1}, err
		}
		return gpuServing{slots: len(ids), devices: ids}, nil
	case policy == activities.GPUPolicyIgnore:
		// No GPU and none declared: nothing to pin; GPU steps run like
		// any other.
		return gpuServing{slots: maxSteps}, nil
	}
	return gpuServing{}, nil
}

// indexDevices are the device IDs of --gpus N: the indexes 0..N-1, as the
// NVIDIA runtime numbers a host's GPUs (nvidia-smi order).
func indexDevices(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	return ids
}

// listNVIDIAGPUs lists the host's GPUs with `nvidia-smi -L`.
func listNVIDIAGPUs() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nvidia-smi", "-L").Output()
	if err != nil {
		return nil, fmt.Errorf("list GPUs with nvidia-smi -L: %w", err)
	}
	return parseNVIDIASMIList(out)
}

var nvidiaSMIGPU = regexp.MustCompile(`^GPU (\d+):.*\(UUID: ([^)\s]+)\)`)

// parseNVIDIASMIList reads the GPUs of `nvidia-smi -L` ("GPU <n>: <name>
// (UUID: GPU-…)"): each by its UUID, stable whatever order the driver
// enumerates them in, or by its index when the line has none. MIG
// instances (indented "MIG …" lines) are not listed: pin them with
// --gpus device=MIG-….
func parseNVIDIASMIList(out []byte) ([]string, error) {
	var ids []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "GPU ") {
			continue
		}
		id := ""
		if m := nvidiaSMIGPU.FindStringSubmatch(line); m != nil {
			id = m[2]
		} else if n, _, ok := strings.Cut(strings.TrimPrefix(line, "GPU "), ":"); ok {
			id = n
		}
		if err := exechost.CheckGPUDevice(id); err != nil {
			return nil, fmt.Errorf("nvidia-smi -L: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
