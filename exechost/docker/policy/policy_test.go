package policy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
)

var testImageID = "sha256:" + strings.Repeat("ab", 32)

func validRequest() exechost.ProvisionRequest {
	return exechost.ProvisionRequest{
		ExecutionID: "run-1/step_a/1",
		Image:       testImageID,
		Resources: exechost.ResourceLimits{
			NanoCPUs: 1e9, MemoryBytes: 256 << 20, DiskBytes: 64 << 20, Pids: 64,
			Runtime: 90 * time.Second, MaxOutputBytes: 1 << 20,
		},
		Network: exechost.NetworkNone,
		Env:     map[string]string{"LOG_LEVEL": "debug"},
		Labels:  map[string]string{"agentflow.test": "1"},
	}
}

func newPolicy(t *testing.T, cfg Config) *Policy {
	t.Helper()
	p, err := New(cfg)
	require.NoError(t, err)
	return p
}

func TestValidateProvision(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		mutate func(*exechost.ProvisionRequest)
		fields []string // PolicyError fields expected; none = valid
	}{
		{name: "valid", mutate: func(*exechost.ProvisionRequest) {}},
		{name: "digest reference", mutate: func(r *exechost.ProvisionRequest) {
			r.Image = "registry.example.com/agent@sha256:" + strings.Repeat("0", 64)
		}},
		{name: "empty network means none", mutate: func(r *exechost.ProvisionRequest) { r.Network = "" }},
		{name: "missing id", mutate: func(r *exechost.ProvisionRequest) { r.ExecutionID = "" }, fields: []string{"execution_id"}},
		{name: "control chars in id", mutate: func(r *exechost.ProvisionRequest) { r.ExecutionID = "a\nb" }, fields: []string{"execution_id"}},
		{name: "tag refused", mutate: func(r *exechost.ProvisionRequest) { r.Image = "agentflow/base:latest" }, fields: []string{"image"}},
		{name: "tag allowed when configured", cfg: Config{AllowUnpinnedImages: true},
			mutate: func(r *exechost.ProvisionRequest) { r.Image = "agentflow/base:latest" }},
		{name: "option-like image even when unpinned allowed", cfg: Config{AllowUnpinnedImages: true},
			mutate: func(r *exechost.ProvisionRequest) { r.Image = "--privileged" }, fields: []string{"image"}},
		{name: "short digest", mutate: func(r *exechost.ProvisionRequest) { r.Image = "sha256:abc" }, fields: []string{"image"}},
		{name: "every limit required", mutate: func(r *exechost.ProvisionRequest) { r.Resources = exechost.ResourceLimits{} },
			fields: []string{"resources.cpu", "resources.memory", "resources.disk", "resources.pids", "resources.max_output", "resources.runtime"}},
		{name: "memory below docker floor", mutate: func(r *exechost.ProvisionRequest) { r.Resources.MemoryBytes = 1 << 20 }, fields: []string{"resources.memory"}},
		{name: "ceilings", cfg: Config{Max: exechost.ResourceLimits{NanoCPUs: 2e9, MemoryBytes: 128 << 20, GPUs: 1}},
			mutate: func(r *exechost.ProvisionRequest) { r.Resources.NanoCPUs = 3e9; r.Resources.GPUs = 2 },
			fields: []string{"resources.cpu", "resources.memory", "resources.gpu"}},
		{name: "bad gpu count", mutate: func(r *exechost.ProvisionRequest) { r.Resources.GPUs = -2 }, fields: []string{"resources.gpu"}},
		{name: "bridge network", mutate: func(r *exechost.ProvisionRequest) { r.Network = "bridge" }, fields: []string{"network"}},
		{name: "host network", mutate: func(r *exechost.ProvisionRequest) { r.Network = "host" }, fields: []string{"network"}},
		{name: "secret-looking env names", mutate: func(r *exechost.ProvisionRequest) {
			r.Env = map[string]string{"GITHUB_TOKEN": "x", "DB_PASSWORD": "x", "apiKey": "x", "OPENAI_API_KEY": "x",
				"AWS_SECRET_ACCESS_KEY": "x", "GCP_CREDENTIALS": "x", "SSH_PRIVATE_KEY": "x", "LOG_LEVEL": "ok"}
		}, fields: []string{"env.GITHUB_TOKEN", "env.DB_PASSWORD", "env.apiKey", "env.OPENAI_API_KEY",
			"env.AWS_SECRET_ACCESS_KEY", "env.GCP_CREDENTIALS", "env.SSH_PRIVATE_KEY"}},
		{name: "invalid env name", mutate: func(r *exechost.ProvisionRequest) { r.Env = map[string]string{"A=B": "x"} }, fields: []string{"env.A=B"}},
		{name: "reserved label", mutate: func(r *exechost.ProvisionRequest) { r.Labels = map[string]string{LabelOwner: "me"} }, fields: []string{"labels." + LabelOwner}},
		{name: "git and checkpoints", mutate: func(r *exechost.ProvisionRequest) {
			r.Workspace = exechost.Workspace{Git: &exechost.GitSource{RepositoryPath: "/srv/repo", Revision: "main"}, Checkpoints: []exechost.CheckpointID{"c1"}}
		}, fields: []string{"workspace"}},
		{name: "option-like revision", mutate: func(r *exechost.ProvisionRequest) {
			r.Workspace.Git = &exechost.GitSource{RepositoryPath: "/srv/repo", Revision: "--output=/tmp/x"}
		}, fields: []string{"workspace.git.revision"}},
		{name: "relative repository", mutate: func(r *exechost.ProvisionRequest) {
			r.Workspace.Git = &exechost.GitSource{RepositoryPath: "repo/../x", Revision: "main"}
		}, fields: []string{"workspace.git.repository"}},
		{name: "path-like checkpoint id", mutate: func(r *exechost.ProvisionRequest) {
			r.Workspace.Checkpoints = []exechost.CheckpointID{"ok", "../../etc"}
		}, fields: []string{"workspace.checkpoints[1]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := validRequest()
			tt.mutate(&req)
			err := newPolicy(t, tt.cfg).ValidateProvision(req)
			if len(tt.fields) == 0 {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, exechost.ErrPolicy)
			require.ElementsMatch(t, tt.fields, policyFields(err))
		})
	}
}

// policyFields lists the Field of every *PolicyError joined in err.
func policyFields(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		if pe, ok := e.(*exechost.PolicyError); ok {
			out = append(out, pe.Field)
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
		} else if u := errors.Unwrap(e); u != nil {
			walk(u)
		}
	}
	walk(err)
	return out
}

func TestValidateExec(t *testing.T) {
	tests := []struct {
		name   string
		req    exechost.ExecRequest
		fields []string
	}{
		{name: "valid", req: exechost.ExecRequest{Command: []string{"/bin/tool"}, Env: map[string]string{"A": "1"}, Secrets: map[string]string{"SLACK_TOKEN": "s"}}},
		{name: "empty command", req: exechost.ExecRequest{}, fields: []string{"command"}},
		{name: "NUL in arg", req: exechost.ExecRequest{Command: []string{"sh", "a\x00b"}}, fields: []string{"command[1]"}},
		{name: "negative timeout", req: exechost.ExecRequest{Command: []string{"x"}, Timeout: -1}, fields: []string{"timeout"}},
		{name: "secret in plain env", req: exechost.ExecRequest{Command: []string{"x"}, Env: map[string]string{"API_TOKEN": "t"}}, fields: []string{"env.API_TOKEN"}},
		{name: "same name twice", req: exechost.ExecRequest{Command: []string{"x"}, Env: map[string]string{"A": "1"}, Secrets: map[string]string{"A": "2"}}, fields: []string{"secrets.A"}},
		{name: "bad secret name", req: exechost.ExecRequest{Command: []string{"x"}, Secrets: map[string]string{"1X": "2"}}, fields: []string{"secrets.1X"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newPolicy(t, Config{}).ValidateExec(tt.req)
			if len(tt.fields) == 0 {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, exechost.ErrPolicy)
			require.ElementsMatch(t, tt.fields, policyFields(err))
		})
	}
}

func TestNewRejectsRootOrNamedUser(t *testing.T) {
	for _, u := range []string{"0:0", "root", "tool", "65532", "1000:0", "-1:5", "a:b"} {
		_, err := New(Config{User: u})
		require.Error(t, err, u)
	}
	p, err := New(Config{})
	require.NoError(t, err)
	require.Equal(t, "65532:65532", p.User())
}

func TestBuild(t *testing.T) {
	p := newPolicy(t, Config{})
	req := validRequest()
	deadline := time.Unix(1700000000, 0)
	spec := p.Build(req, Meta{Owner: "host:1:2", ImageID: testImageID, Deadline: deadline})

	c, hc := spec.Config, spec.HostConfig
	require.Equal(t, testImageID, c.Image)
	require.Equal(t, KeeperUser, c.User, "PID 1 runs as the keeper, not the tool")
	require.Equal(t, "/workspace", c.WorkingDir)
	require.Equal(t, []string{"sleep", "90"}, []string(c.Entrypoint))
	require.Empty(t, c.Cmd)
	require.True(t, c.NetworkDisabled)
	require.Equal(t, []string{"LOG_LEVEL=debug"}, c.Env)
	require.Equal(t, map[string]string{
		"agentflow.test": "1", LabelManaged: "true", LabelExecution: "run-1/step_a/1",
		LabelOwner: "host:1:2", LabelDeadline: "1700000000", LabelImage: testImageID,
	}, c.Labels)

	require.True(t, hc.AutoRemove)
	require.True(t, hc.ReadonlyRootfs)
	require.False(t, hc.Privileged)
	require.Equal(t, []string{"no-new-privileges", seccompOpt}, hc.SecurityOpt)
	require.Equal(t, []string{"ALL"}, []string(hc.CapDrop))
	require.Empty(t, hc.CapAdd)
	require.Equal(t, container.NetworkMode("none"), hc.NetworkMode)
	require.EqualValues(t, 1e9, hc.NanoCPUs)
	require.EqualValues(t, 256<<20+64<<20+DefaultTmpBytes+DefaultShmBytes, hc.Memory, "memory covers the tmpfs")
	require.Equal(t, hc.Memory, hc.MemorySwap)
	require.EqualValues(t, 64, *hc.PidsLimit)
	require.EqualValues(t, DefaultShmBytes, hc.ShmSize)
	require.Empty(t, hc.Binds)
	require.Empty(t, hc.Mounts)
	require.Empty(t, hc.DeviceRequests)
	require.Equal(t, "rw,exec,nosuid,nodev,size=67108864,uid=65532,gid=65532,mode=0700", hc.Tmpfs["/workspace"])
	require.Equal(t, "rw,noexec,nosuid,nodev,size=67108864,mode=1777", hc.Tmpfs["/tmp"])
	require.Equal(t, spec.Name, ContainerName(req.ExecutionID))

	// Runtime rounds up so the in-container deadline is never early.
	req.Resources.Runtime = 1500 * time.Millisecond
	require.Equal(t, []string{"sleep", "2"}, []string(p.Build(req, Meta{ImageID: testImageID}).Config.Entrypoint))
}

func TestGPURequest(t *testing.T) {
	gpu := [][]string{{"gpu"}}
	tests := []struct {
		name    string
		gpus    int
		devices []string
		want    container.DeviceRequest
	}{
		{name: "count", gpus: 1, want: container.DeviceRequest{Count: 1, Capabilities: gpu}},
		{name: "count 4", gpus: 4, want: container.DeviceRequest{Count: 4, Capabilities: gpu}},
		{name: "all", gpus: -1, want: container.DeviceRequest{Count: -1, Capabilities: gpu}},
		// Pinned: the IDs and no count (Docker refuses both at once).
		{name: "pinned index", gpus: 1, devices: []string{"1"}, want: container.DeviceRequest{DeviceIDs: []string{"1"}, Capabilities: gpu}},
		{name: "pinned pair", gpus: 2, devices: []string{"2", "3"}, want: container.DeviceRequest{DeviceIDs: []string{"2", "3"}, Capabilities: gpu}},
		{name: "pinned UUID", gpus: 1, devices: []string{"GPU-8d3b6a7e-1f2c-4c1d-9a0b-5e6f7a8b9c0d"},
			want: container.DeviceRequest{DeviceIDs: []string{"GPU-8d3b6a7e-1f2c-4c1d-9a0b-5e6f7a8b9c0d"}, Capabilities: gpu}},
		{name: "pinned MIG", gpus: 1, devices: []string{"0:1"}, want: container.DeviceRequest{DeviceIDs: []string{"0:1"}, Capabilities: gpu}},
	}
	p := newPolicy(t, Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := validRequest()
			req.Resources.GPUs, req.Resources.GPUDevices = tt.gpus, tt.devices
			require.NoError(t, p.ValidateProvision(req))
			hc := p.Build(req, Meta{ImageID: testImageID}).HostConfig
			require.Equal(t, []container.DeviceRequest{tt.want}, hc.DeviceRequests)
		})
	}
	require.Equal(t, "nvidia", GPURequest("nvidia", exechost.ResourceLimits{GPUs: 1}).Driver)
	require.Empty(t, p.Build(validRequest(), Meta{ImageID: testImageID}).HostConfig.DeviceRequests, "no GPU, no device request")
}

func TestValidateGPUDevices(t *testing.T) {
	tests := []struct {
		name    string
		gpus    int
		devices []string
		fields  []string
	}{
		{name: "as many as gpu", gpus: 2, devices: []string{"0", "GPU-1a2b"}},
		{name: "fewer than gpu", gpus: 2, devices: []string{"0"}, fields: []string{"resources.gpu_devices"}},
		{name: "with gpu all", gpus: -1, devices: []string{"0"}, fields: []string{"resources.gpu_devices"}},
		{name: "without gpu", gpus: 0, devices: []string{"0"}, fields: []string{"resources.gpu_devices"}},
		// A ',' would hand the runtime a second device.
		{name: "a list in one ID", gpus: 1, devices: []string{"0,1"}, fields: []string{"resources.gpu_devices[0]"}},
		{name: "a runtime keyword", gpus: 2, devices: []string{"all", "Void"}, fields: []string{"resources.gpu_devices[0]", "resources.gpu_devices[1]"}},
		{name: "empty ID", gpus: 1, devices: []string{""}, fields: []string{"resources.gpu_devices[0]"}},
		{name: "space", gpus: 1, devices: []string{"0 1"}, fields: []string{"resources.gpu_devices[0]"}},
		{name: "option-like", gpus: 1, devices: []string{"-1"}, fields: []string{"resources.gpu_devices[0]"}},
		{name: "twice", gpus: 2, devices: []string{"1", "1"}, fields: []string{"resources.gpu_devices[1]"}},
		{name: "too long", gpus: 1, devices: []string{strings.Repeat("a", 129)}, fields: []string{"resources.gpu_devices[0]"}},
	}
	p := newPolicy(t, Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := validRequest()
			req.Resources.GPUs, req.Resources.GPUDevices = tt.gpus, tt.devices
			err := p.ValidateProvision(req)
			if len(tt.fields) == 0 {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, exechost.ErrPolicy)
			require.ElementsMatch(t, tt.fields, policyFields(err))
		})
	}
}

func TestExecEnvKeepsSecretsOutOfContainerConfig(t *testing.T) {
	p := newPolicy(t, Config{})
	req := validRequest()
	spec := p.Build(req, Meta{ImageID: testImageID})
	env := ExecEnv(exechost.ExecRequest{Env: map[string]string{"B": "2", "A": "1"}, Secrets: map[string]string{"TOKEN": "s3cr3t"}})
	require.Equal(t, []string{"A=1", "B=2", "TOKEN=s3cr3t"}, env)
	for _, e := range spec.Config.Env {
		require.NotContains(t, e, "s3cr3t")
	}
}

func TestCheckImageVolumes(t *testing.T) {
	require.NoError(t, CheckImageVolumes(nil))
	require.NoError(t, CheckImageVolumes(map[string]struct{}{"/workspace": {}, "/tmp/": {}}))
	err := CheckImageVolumes(map[string]struct{}{"/data": {}, "/workspace": {}})
	require.ErrorIs(t, err, exechost.ErrPolicy)
	require.ErrorContains(t, err, "/data")
}

func TestContainerName(t *testing.T) {
	a := ContainerName("agent-1/step/1")
	require.Equal(t, a, ContainerName("agent-1/step/1"), "stable")
	require.NotEqual(t, a, ContainerName("agent-1/step/2"))
	require.NotEqual(t, ContainerName("a/b"), ContainerName("a_b"), "sanitizing must not collide")
	require.Regexp(t, `^agentflow-[A-Za-z0-9_.-]+-[0-9a-f]{12}$`, ContainerName("ünïcode and spaces"))
	require.LessOrEqual(t, len(ContainerName(exechost.ExecutionID(strings.Repeat("x", 200)))), 80)
}

func TestCheckRevision(t *testing.T) {
	for _, rev := range []string{"", "-x", "--output=/tmp/x", "main branch", "a\nb", strings.Repeat("a", 300)} {
		require.Error(t, exechost.CheckRevision(rev), rev)
	}
	for _, rev := range []string{"main", "HEAD~1", "v1.2.3", "0123abc", "refs/heads/feature-x"} {
		require.NoError(t, exechost.CheckRevision(rev), rev)
	}
}
