package worker

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/activities"
)

func TestGPUSlots(t *testing.T) {
	four := func() (int, error) { return 4, nil }
	broken := func() (int, error) { return 0, errors.New("nvidia-smi: not found") }
	req, ign := activities.GPUPolicyRequire, activities.GPUPolicyIgnore
	for _, tc := range []struct {
		name     string
		declared int
		runtime  bool
		policy   activities.GPUPolicy
		count    func() (int, error)
		want     int
		err      string
	}{
		{"none declared", GPUsNone, true, req, four, 0, ""},
		{"declared with a runtime", 2, true, req, four, 2, ""},
		{"declared, no runtime, ignore", 1, false, ign, four, 1, ""},
		{"declared, no runtime, require", 1, false, req, four, 0, "no GPU runtime"},
		{"auto with a runtime counts", GPUsAuto, true, req, four, 4, ""},
		{"auto, runtime, count fails: one at a time", GPUsAuto, true, req, broken, 1, "nvidia-smi"},
		{"auto, no runtime, ignore: like any step", GPUsAuto, false, ign, four, 8, ""},
		{"auto, no runtime, require: no GPU queue", GPUsAuto, false, req, four, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := gpuSlots(tc.declared, tc.runtime, tc.policy, 8, tc.count)
			require.Equal(t, tc.want, n)
			if tc.err == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.err)
			}
		})
	}
}

func TestParseNVIDIASMIList(t *testing.T) {
	out := []byte("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-1)\nGPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-2)\n  MIG 1g.5gb Device 0: (UUID: MIG-3)\n")
	require.Equal(t, 2, parseNVIDIASMIList(out))
	require.Equal(t, 0, parseNVIDIASMIList(nil))
}
