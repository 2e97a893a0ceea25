package activities

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
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
