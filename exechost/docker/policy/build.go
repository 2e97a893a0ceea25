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

// KeeperUser is the numeric uid:gid of PID 1, the in-container deadline
// keeper (`sleep <runtime>`). It is not the tool's user, so a tool (no
// capabilities, no-new-privileges) can neither signal, ptrace, nor write
// /proc/1/mem of it: the deadline holds with no worker alive. Numeric, so it
// needs no passwd entry in the image. Every exec names its own user
// (runner.ErrNoUser), so nothing else ever runs as the keeper.
const (
	KeeperUser = "65533:65533"
	keeperUID  = 65533
)

// CheckKeeper refuses a tool user that would share the keeper's uid.
func CheckKeeper(user string) error {
	uid, _, err := parseUser(user)
	if err != nil {
		return err
	}
	if uid == keeperUID {
		return fmt.Errorf("policy config: user %q: uid %d is reserved for the sandbox's PID 1", user, keeperUID)
	}
	return nil
}

// MemoryLimit is the memory cgroup limit of a sandbox: the tool's memory
// plus every tmpfs the sandbox has (/workspace = disk, /tmp, /dev/shm),
// because tmpfs pages are charged to the container's memory cgroup. A full
// disk is then ENOSPC, never an OOM kill. The price: while its tmpfs are
// empty a tool may use up to this much memory, not only r.MemoryBytes.
func (p *Policy) MemoryLimit(r exechost.ResourceLimits) int64 {
	return r.MemoryBytes + r.DiskBytes + p.cfg.TmpBytes + p.cfg.ShmBytes
}

// RuntimeSeconds is the in-container deadline: PID 1 is `sleep <seconds>`,
// so the container exits (and, being auto-removed, disappears) even if the
// host that created it is gone.
func RuntimeSeconds(r time.Duration) int64 {
	return int64(math.Ceil(r.Seconds()))
}

// OwnershipLabels are the labels every container and network of one
// execution carries: the request's own, then who owns it, which execution
// it belongs to and when it must be gone (the reaper reads them).
func OwnershipLabels(req exechost.ProvisionRequest, meta Meta) map[string]string {
	labels := make(map[string]string, len(req.Labels)+5)
	for k, v := range req.Labels {
		labels[k] = v
	}
	labels[LabelManaged] = "true"
	labels[LabelExecution] = string(req.ExecutionID)
	labels[LabelOwner] = meta.Owner
	labels[LabelDeadline] = strconv.FormatInt(meta.Deadline.Unix(), 10)
	return labels
}

// Build turns a request that passed ValidateProvision into container
// configuration. It never consults the image's own entrypoint, user,
// working directory or volumes.
func (p *Policy) Build(req exechost.ProvisionRequest, meta Meta) Spec {
	r := req.Resources
	labels := OwnershipLabels(req, meta)
	labels[LabelImage] = meta.ImageID

	cfg := &container.Config{
		Hostname:        "sandbox",
		User:            KeeperUser, // PID 1 only; execs run as p.cfg.User
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

	mem := p.MemoryLimit(r)
	hc := &container.HostConfig{
		AutoRemove:     true,
		NetworkMode:    container.NetworkMode(exechost.NetworkNone),
		ReadonlyRootfs: true,
		SecurityOpt:    []string{"no-new-privileges", seccompOpt},
		CapDrop:        []string{"ALL"},
		Privileged:     false,
		IpcMode:        container.IPCModePrivate,
		ShmSize:        p.cfg.ShmBytes,
		LogConfig:      container.LogConfig{Type: "none"},
		Tmpfs: map[string]string{
			// exec: tools may build and run programs in their workspace.
			WorkspaceDir: fmt.Sprintf("rw,exec,nosuid,nodev,size=%d,uid=%d,gid=%d,mode=0700", r.DiskBytes, p.uid, p.gid),
			// noexec: scratch space only; anything meant to run goes in /workspace.
			TmpDir: fmt.Sprintf("rw,noexec,nosuid,nodev,size=%d,mode=1777", p.cfg.TmpBytes),
		},
		Resources: container.Resources{
			NanoCPUs:   r.NanoCPUs,
			Memory:     mem,
			MemorySwap: mem, // equal: no swap
			PidsLimit:  &r.Pids,
			Ulimits:    []*container.Ulimit{{Name: "core", Soft: 0, Hard: 0}},
		},
	}
	if r.GPUs != 0 {
		hc.Resources.DeviceRequests = []container.DeviceRequest{GPURequest(p.cfg.GPUDriver, r)}
	}
	return Spec{
		Name:       ContainerName(req.ExecutionID),
		Config:     cfg,
		HostConfig: hc,
		Network:    &network.NetworkingConfig{},
	}
}

// GPURequest is the sandbox's Docker device request for r's GPUs: exactly
// r.GPUDevices when set (`docker run --gpus '"device=ID,…"'`), else a
// count (-1 = all; `--gpus N`). Docker turns a count N into devices 0..N-1,
// whatever else runs there, so a caller that runs GPU sandboxes side by
// side pins them; the daemon refuses a request with both a count and IDs.
func GPURequest(driver string, r exechost.ResourceLimits) container.DeviceRequest {
	req := container.DeviceRequest{Driver: driver, Capabilities: [][]string{{"gpu"}}}
	if len(r.GPUDevices) > 0 {
		req.DeviceIDs = append([]string(nil), r.GPUDevices...)
	} else {
		req.Count = r.GPUs
	}
	return req
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
