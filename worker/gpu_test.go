package worker

import (
	"testing"

	"github.com/docker/docker/api/types/system"
	"github.com/stretchr/testify/require"
)

func TestGPURuntime(t *testing.T) {
	rt := func(path string) system.RuntimeWithStatus {
		return system.RuntimeWithStatus{Runtime: system.Runtime{Path: path}}
	}
	tests := []struct {
		name string
		info system.Info
		want bool
	}{
		{name: "runc only (this CI host)", info: system.Info{DefaultRuntime: "runc", Runtimes: map[string]system.RuntimeWithStatus{
			"runc": rt("runc"), "io.containerd.runc.v2": rt("runc"),
		}}},
		{name: "no runtimes listed", info: system.Info{}},
		{name: "nvidia-ctk runtime configure", want: true, info: system.Info{DefaultRuntime: "runc", Runtimes: map[string]system.RuntimeWithStatus{
			"runc": rt("runc"), "nvidia": rt("nvidia-container-runtime"),
		}}},
		{name: "renamed runtime, nvidia binary", want: true, info: system.Info{Runtimes: map[string]system.RuntimeWithStatus{
			"gpu": rt("/usr/bin/nvidia-container-runtime"),
		}}},
		{name: "nvidia as default", want: true, info: system.Info{DefaultRuntime: "nvidia"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, gpuRuntime(tc.info))
			require.Equal(t, tc.info.DefaultRuntime == "nvidia", gpuDefaultRuntime(tc.info), "the default runtime is nvidia")
		})
	}
}
