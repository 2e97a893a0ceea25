//go:build integration

package bench

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/internal/spec"
)

// The step the sandbox benchmarks measure, in each of its forms: the echo
// tool with payload1K's object, under sandboxLimits.

// echoText is payload1K's text: a step's input is the same object.
var echoText = strings.Repeat("x", 1024-11)

// echoStep is one echo step of a plan, depending on deps.
func echoStep(imageID, id string, deps ...string) spec.PlanStep {
	limits := spec.Resources{NanoCPUs: sandboxLimits.NanoCPUs, MemoryBytes: sandboxLimits.MemoryBytes,
		DiskBytes: sandboxLimits.DiskBytes, Pids: sandboxLimits.Pids, MaxOutputBytes: sandboxLimits.MaxOutputBytes}
	return spec.PlanStep{ID: id, Tool: "echo:1.0", Image: imageID, Inputs: map[string]any{"text": echoText},
		DependsOn: deps, ExplicitDependsOn: deps, Timeout: sandboxLimits.Runtime, Resources: limits}
}

// echoChain is a plan of n echo steps s0 … s(n-1), each depending on the
// one before.
func echoChain(name, imageID string, n int) spec.Plan {
	p := spec.Plan{SchemaVersion: spec.PlanSchemaVersion, Name: name, Version: "1.0.0"}
	for i := range n {
		var deps []string
		if i > 0 {
			deps = []string{fmt.Sprintf("s%d", i-1)}
		}
		p.Steps = append(p.Steps, echoStep(imageID, fmt.Sprintf("s%d", i), deps...))
	}
	return p
}

// echoCycle is one step on an ExecutionHost directly: provision (the
// workspace restored from the checkpoints from, layered in order) → exec
// of the tool with payload → checkpoint → terminate. The caller deletes
// the returned checkpoint.
func echoCycle(ctx context.Context, host exechost.ExecutionHost, store checkpoint.Store, id exechost.ExecutionID,
	imageID string, labels map[string]string, payload []byte, from ...exechost.CheckpointID) (exechost.CheckpointID, error) {
	x, err := host.Provision(ctx, exechost.ProvisionRequest{ExecutionID: id, Image: imageID,
		Workspace: exechost.Workspace{Checkpoints: from}, Resources: sandboxLimits, Labels: labels})
	if err != nil {
		return "", err
	}
	defer host.Terminate(context.Background(), x.ExecutionID)
	res, err := host.Exec(ctx, id, exechost.ExecRequest{Command: []string{"/bin/tool"}, Stdin: payload, Timeout: time.Minute})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 || !bytes.Contains(res.Stdout, []byte(`"text"`)) {
		return "", fmt.Errorf("tool: exit %d: %s %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	ck, err := host.Checkpoint(ctx, id, exechost.CheckpointRequest{})
	if err != nil {
		return "", err
	}
	if err := host.Terminate(ctx, id); err != nil {
		_ = store.Delete(context.Background(), ck.CheckpointID)
		return "", err
	}
	return ck.CheckpointID, nil
}

// bareDockerRun is the baseline the sandbox benchmarks compare with: a bare
// `docker run --rm -i` of the image with the sandbox's hardening flags and
// limits, the payload on stdin.
func bareDockerRun(ctx context.Context, imageID string, payload []byte) error {
	cmd := exec.CommandContext(ctx, "docker", "run", "--rm", "-i",
		"--label", "agentflow.test=1",
		"--read-only", "--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--user", "65532:65532", "--workdir", "/workspace",
		"--cpus", "1", "--memory", strconv.FormatInt(sandboxLimits.MemoryBytes, 10),
		"--memory-swap", strconv.FormatInt(sandboxLimits.MemoryBytes, 10),
		"--pids-limit", strconv.FormatInt(sandboxLimits.Pids, 10), "--shm-size", "1m",
		"--tmpfs", fmt.Sprintf("/workspace:rw,exec,nosuid,nodev,size=%d,uid=65532,gid=65532,mode=0700", sandboxLimits.DiskBytes),
		"--tmpfs", "/tmp:rw,noexec,nosuid,nodev,size=67108864,mode=1777",
		imageID)
	cmd.Stdin = bytes.NewReader(payload)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(`"text"`)) {
		return fmt.Errorf("docker run: %v: %s", err, out)
	}
	return nil
}
