package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/capacity"
)

func TestParseGPUPolicy(t *testing.T) {
	tests := []struct {
		in      string
		want    GPUPolicy
		wantErr bool
	}{
		{in: "", want: GPUPolicyRequire},
		{in: "require", want: GPUPolicyRequire},
		{in: " Ignore ", want: GPUPolicyIgnore},
		{in: "fallback", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseGPUPolicy(tc.in)
			if tc.wantErr {
				require.ErrorContains(t, err, `want "require" or "ignore"`)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestRunStepGPUPolicy covers every combination of "step asks for GPUs",
// "host has a GPU runtime" and the policy.
func TestRunStepGPUPolicy(t *testing.T) {
	tests := []struct {
		name      string
		gpus      int
		available bool
		policy    GPUPolicy
		// wantErr: the step fails non-retryably before any sandbox exists.
		wantErr     bool
		wantGPUs    int
		wantIgnored bool
	}{
		{name: "no gpu requested, no gpu host", gpus: 0, policy: GPUPolicyRequire, wantGPUs: 0},
		{name: "default policy is require", gpus: 1, policy: "", wantErr: true},
		{name: "require refuses", gpus: 1, policy: GPUPolicyRequire, wantErr: true},
		{name: "require refuses all", gpus: -1, policy: GPUPolicyRequire, wantErr: true},
		{name: "ignore runs without", gpus: 2, policy: GPUPolicyIgnore, wantGPUs: 0, wantIgnored: true},
		{name: "gpu host gets the request", gpus: 1, available: true, policy: GPUPolicyRequire, wantGPUs: 1},
		{name: "gpu host ignores the policy", gpus: -1, available: true, policy: GPUPolicyIgnore, wantGPUs: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.opts.GPUAvailable = tc.available
			h.opts.GPUPolicy = tc.policy
			req := baseReq()
			req.Resources.GPUs = tc.gpus
			res, err := h.run(t, req)
			provisions, execs, _, _, live := h.host.snapshot()
			require.Zero(t, live)

			if tc.wantErr {
				var appErr *temporal.ApplicationError
				require.ErrorAs(t, err, &appErr)
				require.Equal(t, ErrTypePolicy, appErr.Type())
				require.True(t, appErr.NonRetryable())
				require.Contains(t, appErr.Message(), "no GPU runtime")
				require.Contains(t, appErr.Message(), "--gpu-policy ignore")
				require.Empty(t, provisions, "no sandbox may be created for a refused GPU step")
				// agentctl logs shows why.
				require.Contains(t, h.log(t, req), "no GPU runtime")
				return
			}
			require.NoError(t, err)
			require.NotNil(t, res)
			require.Len(t, provisions, 1)
			require.Equal(t, tc.wantGPUs, provisions[0].Resources.GPUs)
			require.Len(t, execs, 1)
			v, ok := execs[0].Env[EnvGPUIgnored]
			require.Equal(t, tc.wantIgnored, ok, "env %s", EnvGPUIgnored)
			if tc.wantIgnored {
				require.Equal(t, "1", v)
			}
		})
	}
}

// TestRunStepPinsGPUDevices: on a worker with GPU devices, an attempt's
// sandbox gets exactly the devices its lease names (or, under --gpu-policy
// ignore, none, with the assignment in its label and env), a step needing
// more devices than the worker has fails before any sandbox exists, and
// the devices are given back in every case.
func TestRunStepPinsGPUDevices(t *testing.T) {
	tests := []struct {
		name      string
		devices   []string // the worker's; none: a worker that does not pin
		available bool
		policy    GPUPolicy
		gpus      int
		// wantGPUs and wantDevices: the provision request's; assigned: the
		// label and env (also when the sandbox gets none).
		wantGPUs    int
		wantDevices []string
		assigned    string
		tooMany     string // the failure message's core, if the step fails
	}{
		{name: "one of two", devices: []string{"0", "1"}, available: true, gpus: 1, wantGPUs: 1, wantDevices: []string{"0"}, assigned: "0"},
		{name: "all is this worker's all", devices: []string{"GPU-a", "GPU-b"}, available: true, gpus: -1,
			wantGPUs: 2, wantDevices: []string{"GPU-a", "GPU-b"}, assigned: "GPU-a,GPU-b"},
		{name: "ignore: held, not attached", devices: []string{"0", "1"}, policy: GPUPolicyIgnore, gpus: 2, wantGPUs: 0, assigned: "0,1"},
		{name: "no GPUs requested", devices: []string{"0", "1"}, available: true, gpus: 0},
		{name: "a worker that does not pin: a count", available: true, gpus: 1, wantGPUs: 1},
		{name: "more than the worker has", devices: []string{"0", "1"}, available: true, gpus: 3,
			tooMany: "requests 3 GPUs but worker test-worker has 2 GPUs"},
		{name: "more than the worker has, ignore", devices: []string{"0"}, policy: GPUPolicyIgnore, gpus: 2,
			tooMany: "requests 2 GPUs but worker test-worker has 1 GPU"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool, err := capacity.New(capacity.Size{NanoCPUs: capacity.Unbounded, MemoryBytes: capacity.Unbounded}, 4, tc.devices)
			require.NoError(t, err)
			h := newHarness(t)
			h.opts.Capacity, h.opts.Identity = pool, "test-worker"
			h.opts.GPUAvailable, h.opts.GPUPolicy = tc.available, tc.policy
			req := baseReq()
			req.Resources.GPUs = tc.gpus
			_, err = h.run(t, req)
			provisions, execs, _, _, live := h.host.snapshot()
			require.Zero(t, live)
			require.Equal(t, capacity.Size{}, pool.InUse(), "the devices are given back")
			if tc.tooMany != "" {
				var appErr *temporal.ApplicationError
				require.ErrorAs(t, err, &appErr)
				require.Equal(t, ErrTypePolicy, appErr.Type())
				require.True(t, appErr.NonRetryable())
				require.Contains(t, appErr.Message(), tc.tooMany)
				require.Empty(t, provisions, "no sandbox for a step this worker can never run")
				return
			}
			require.NoError(t, err)
			require.Len(t, provisions, 1)
			got := provisions[0]
			require.Equal(t, tc.wantGPUs, got.Resources.GPUs)
			require.Equal(t, tc.wantDevices, got.Resources.GPUDevices)
			require.Equal(t, tc.assigned, got.Labels[LabelGPUDevices])
			require.Len(t, execs, 1)
			require.Equal(t, tc.assigned, execs[0].Env[EnvGPUDevices])
			_, ignored := execs[0].Env[EnvGPUIgnored]
			require.Equal(t, tc.policy == GPUPolicyIgnore && tc.gpus != 0, ignored)
		})
	}
}

// Two GPU steps at once on a two-GPU worker: each sandbox gets its own
// device, and both are free again afterwards.
func TestRunStepConcurrentGPUStepsGetDifferentDevices(t *testing.T) {
	pool, err := capacity.New(capacity.Size{NanoCPUs: capacity.Unbounded, MemoryBytes: capacity.Unbounded}, 4, []string{"0", "1"})
	require.NoError(t, err)
	h := newHarness(t)
	h.opts.Capacity, h.opts.GPUAvailable = pool, true
	var started sync.WaitGroup
	started.Add(2)
	h.host.exec = func(_ context.Context, req exechost.ExecRequest) (*exechost.ExecResult, error) {
		started.Done()
		started.Wait() // both sandboxes exist, each with its devices
		return &exechost.ExecResult{Stdout: req.Stdin}, nil
	}
	var wg sync.WaitGroup
	for _, id := range []string{"train_a", "train_b"} {
		wg.Go(func() {
			req := baseReq()
			req.StepID, req.Resources.GPUs = id, 1
			_, err := h.run(t, req)
			require.NoError(t, err)
		})
	}
	wg.Wait()
	provisions, _, _, _, _ := h.host.snapshot()
	require.Len(t, provisions, 2)
	got := []string{}
	for _, p := range provisions {
		require.Len(t, p.Resources.GPUDevices, 1)
		got = append(got, p.Resources.GPUDevices[0])
	}
	require.ElementsMatch(t, []string{"0", "1"}, got)
	require.Equal(t, capacity.Size{}, pool.InUse())
}

// The devices are given back whatever ends the attempt: a tool failure, a
// provision failure, a panic in the host, a cancellation.
func TestRunStepReleasesGPUDevices(t *testing.T) {
	tests := []struct {
		name  string
		setup func(h *harness)
	}{
		{name: "tool failure", setup: func(h *harness) {
			h.host.exec = func(context.Context, exechost.ExecRequest) (*exechost.ExecResult, error) {
				return &exechost.ExecResult{ExitCode: 3}, nil
			}
		}},
		{name: "provision failure", setup: func(h *harness) { h.host.provisionErr = errors.New("daemon hiccup") }},
		{name: "panic", setup: func(h *harness) {
			h.host.exec = func(context.Context, exechost.ExecRequest) (*exechost.ExecResult, error) { panic("host bug") }
		}},
		{name: "canceled", setup: func(h *harness) {
			ctx, cancel := context.WithCancel(context.Background())
			h.bg = ctx
			h.host.exec = func(ctx context.Context, _ exechost.ExecRequest) (*exechost.ExecResult, error) {
				cancel()
				<-ctx.Done()
				return nil, fmt.Errorf("exec: %w", exechost.ErrAborted)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool, err := capacity.New(capacity.Size{NanoCPUs: capacity.Unbounded, MemoryBytes: capacity.Unbounded}, 4, []string{"0"})
			require.NoError(t, err)
			h := newHarness(t)
			h.opts.Capacity, h.opts.GPUAvailable = pool, true
			tc.setup(h)
			req := baseReq()
			req.Resources.GPUs = 1
			_, err = h.run(t, req)
			require.Error(t, err)
			provisions, _, _, _, _ := h.host.snapshot()
			require.Len(t, provisions, 1)
			require.Equal(t, []string{"0"}, provisions[0].Resources.GPUDevices)
			require.Equal(t, capacity.Size{}, pool.InUse(), "the device is given back")
		})
	}
}
