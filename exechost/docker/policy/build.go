package policy

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/agentflow/agentflow/exechost"
)

// Spec is everything Docker needs to create one sandbox.
type Spec struct {
	Name       string
	Config     *container.Config
	HostConfig *container.HostConfig
	Network    *network.NetworkingConfig
}

// Meta is what the host adds to a validated request: who owns the sandbox,
// the resolved image ID and when it must be gone.
type Meta struct {
	Owner    string
	ImageID  string // "sha256:…" from image inspect; the container runs exactly this
	Deadline time.Time
}

// RuntimeSeconds is the in-container deadline: PID 1 is `sleep <seconds>`,
// so the container exits (and, being auto-removed, disappears) even if the
// host that created it is gone.
func RuntimeSeconds(r time.Duration) int64 {
	return int64(math.Ceil(r.Seconds()))
}

// Build turns a request that passed ValidateProvision into container
// configuration. It never consults the image's own entrypoint, user,
// working directory or volumes.
func (p *Policy) Build(req exechost.ProvisionRequest, meta Meta) Spec {
	r := req.Resources
	labels := make(map[string]string, len(req.Labels)+5)
	for k, v := range req.Labels {
		labels[k] = v
	}
	labels[LabelManaged] = "true"
	labels[LabelExecution] = string(req.ExecutionID)
	labels[LabelOwner] = meta.Owner
	labels[LabelDeadline] = strconv.FormatInt(meta.Deadline.Unix(), 10)
	labels[LabelImage] = meta.ImageID

	cfg := &container.Config{
		Hostname:        "sandbox",
		User:            p.cfg.User,
		Env:             envList(req.Env),
		Entrypoint:      []string{"sleep", strconv.FormatInt(RuntimeSeconds(r.Runtime), 10)},
		Cmd:             nil,
		Image:           meta.ImageID,
		WorkingDir:      WorkspaceDir,
		Labels:          labels,
		NetworkDisabled: true,
		// An empty Volumes map: the image's own VOLUMEs are refused by
		// CheckImageVolumes before we get here.
		Volumes: map[string]struct{}{},
	}

	tmp := min(p.cfg.TmpBytes, r.MemoryBytes)
	hc := &container.HostConfig{
		AutoRemove:     true,
		NetworkMode:    container.NetworkMode(exechost.NetworkNone),
		ReadonlyRootfs: true,
		SecurityOpt:    []string{"no-new-privileges"},
		CapDrop:        []string{"ALL"},
		Privileged:     false,
		IpcMode:        container.IPCModePrivate,
		ShmSize:        p.cfg.ShmBytes,
		LogConfig:      container.LogConfig{Type: "none"},
		Tmpfs: map[string]string{
			// exec: tools may build and run programs in their workspace.
			WorkspaceDir: fmt.Sprintf("rw,exec,nosuid,nodev,size=%d,uid=%d,gid=%d,mode=0700", r.DiskBytes, p.uid, p.gid),
			// noexec: scratch space only; anything meant to run goes in /workspace.
			TmpDir: fmt.Sprintf("rw,noexec,nosuid,nodev,size=%d,mode=1777", tmp),
		},
		Resources: container.Resources{
			NanoCPUs:   r.NanoCPUs,
			Memory:     r.MemoryBytes,
			MemorySwap: r.MemoryBytes, // equal: no swap
			PidsLimit:  &r.Pids,
			Ulimits:    []*container.Ulimit{{Name: "core", Soft: 0, Hard: 0}},
		},
	}
	if r.GPUs != 0 {
		hc.Resources.DeviceRequests = []container.DeviceRequest{GPURequest(p.cfg.GPUDriver, r.GPUs)}
	}
	return Spec{
		Name:       ContainerName(req.ExecutionID),
		Config:     cfg,
		HostConfig: hc,
		Network:    &network.NetworkingConfig{},
	}
}

// GPURequest maps a GPU count (-1 = all) to a Docker device request, the
// equivalent of `docker run --gpus N`.
func GPURequest(driver string, n int) container.DeviceRequest {
	return container.DeviceRequest{
		Driver:       driver,
		Count:        n,
		Capabilities: [][]string{{"gpu"}},
	}
}

// ExecEnv is the environment of one exec: plain env then secrets, sorted
// for a stable order. Secrets appear only here, never in the container's
// configuration.
func ExecEnv(req exechost.ExecRequest) []string {
	out := envList(req.Env)
	return append(out, envList(req.Secrets)...)
}

func envList(env map[string]string) []string {
	if len(env) == 0 {
		return nil
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}
