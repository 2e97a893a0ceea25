package worker

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/activities"
)

func TestGPUServe(t *testing.T) {
	four := func() ([]string, error) { return []string{"GPU-a", "GPU-b", "GPU-c", "GPU-d"}, nil }
	broken := func() ([]string, error) { return nil, errors.New("nvidia-smi: not found") }
	empty := func() ([]string, error) { return nil, nil }
	req, ign := activities.GPUPolicyRequire, activities.GPUPolicyIgnore
	for _, tc := range []struct {
		name     string
		declared int
		listed   []string
		runtime  bool
		policy   activities.GPUPolicy
		list     func() ([]string, error)
		want     gpuServing
		err      string
	}{
		{"none declared", GPUsNone, nil, true, req, four, gpuServing{}, ""},
		{"declared with a runtime: indexes", 2, nil, true, req, four, gpuServing{2, []string{"0", "1"}}, ""},
		{"declared, no runtime, ignore: pinned all the same", 2, nil, false, ign, four, gpuServing{2, []string{"0", "1"}}, ""},
		{"declared, no runtime, require", 1, nil, false, req, four, gpuServing{}, "no GPU runtime"},
		{"listed devices", GPUsAuto, []string{"1", "3"}, true, req, four, gpuServing{2, []string{"1", "3"}}, ""},
		{"listed devices, no runtime, require", GPUsAuto, []string{"1"}, false, req, four, gpuServing{}, "no GPU runtime"},
		{"auto with a runtime lists", GPUsAuto, nil, true, req, four, gpuServing{4, []string{"GPU-a", "GPU-b", "GPU-c", "GPU-d"}}, ""},
		{"auto, runtime, list fails: one at a time, unpinned", GPUsAuto, nil, true, req, broken, gpuServing{slots: 1}, "nvidia-smi"},
		{"auto, runtime, nothing listed: one at a time, unpinned", GPUsAuto, nil, true, req, empty, gpuServing{slots: 1}, "lists no GPU"},
		{"auto, no runtime, ignore: like any step, unpinned", GPUsAuto, nil, false, ign, four, gpuServing{slots: 8}, ""},
		{"auto, no runtime, require: no GPU queue", GPUsAuto, nil, false, req, four, gpuServing{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := gpuServe(tc.declared, tc.listed, tc.runtime, tc.policy, 8, tc.list)
			require.Equal(t, tc.want, got)
			if tc.err == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.err)
			}
		})
	}
}

func TestParseNVIDIASMIList(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want []string
		err  string
	}{
		{name: "UUIDs, MIG lines skipped", out: "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-1a2b)\nGPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-3c4d)\n" +
			"  MIG 1g.5gb     Device  0: (UUID: MIG-5e6f)\n", want: []string{"GPU-1a2b", "GPU-3c4d"}},
		{name: "no UUID: the index", out: "GPU 0: Tesla T4\nGPU 1: Tesla T4\n", want: []string{"0", "1"}},
		{name: "nothing", out: "", want: nil},
		{name: "a device ID that could smuggle a list", out: "GPU 0: X (UUID: GPU-1,all)\n", err: "GPU device"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseNVIDIASMIList([]byte(tc.out))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
