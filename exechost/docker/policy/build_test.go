package policy

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMemoryLimitCoversEveryTmpfs(t *testing.T) {
	tests := []struct {
		name           string
		cfg            Config
		memory, disk   int64
		wantCgroupSize int64
	}{
		{name: "defaults", memory: 128 << 20, disk: 32 << 20, wantCgroupSize: 128<<20 + 32<<20 + DefaultTmpBytes + DefaultShmBytes},
		{name: "disk larger than memory", memory: 32 << 20, disk: 256 << 20, wantCgroupSize: 32<<20 + 256<<20 + DefaultTmpBytes + DefaultShmBytes},
		{name: "operator tmpfs sizes", cfg: Config{TmpBytes: 8 << 20, ShmBytes: 2 << 20}, memory: 64 << 20, disk: 16 << 20, wantCgroupSize: 64<<20 + 16<<20 + 8<<20 + 2<<20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPolicy(t, tt.cfg)
			req := validRequest()
			req.Resources.MemoryBytes, req.Resources.DiskBytes = tt.memory, tt.disk
			require.NoError(t, p.ValidateProvision(req))
			require.Equal(t, tt.wantCgroupSize, p.MemoryLimit(req.Resources))
			hc := p.Build(req, Meta{ImageID: testImageID, Deadline: time.Unix(1, 0)}).HostConfig
			require.Equal(t, tt.wantCgroupSize, hc.Memory)
			require.Equal(t, hc.Memory, hc.MemorySwap, "no swap")
			require.Contains(t, hc.Tmpfs[WorkspaceDir], "size="+itoa(tt.disk)+",")
			tmp := tt.cfg.TmpBytes
			if tmp == 0 {
				tmp = DefaultTmpBytes
			}
			require.Contains(t, hc.Tmpfs[TmpDir], "size="+itoa(tmp)+",", "/tmp keeps its size: memory covers it")
		})
	}
}

func TestKeeperIsNotTheTool(t *testing.T) {
	require.NoError(t, CheckKeeper(DefaultUser))
	require.NoError(t, CheckKeeper("1000:1000"))
	require.Error(t, CheckKeeper(KeeperUser))
	require.Error(t, CheckKeeper("65533:1000"), "same uid, other gid is still the keeper's uid")
	require.Error(t, CheckKeeper("tool"))

	p := newPolicy(t, Config{User: "1000:1000"})
	spec := p.Build(validRequest(), Meta{ImageID: testImageID})
	require.Equal(t, KeeperUser, spec.Config.User)
	require.NotEqual(t, p.User(), spec.Config.User)
	require.Contains(t, spec.HostConfig.SecurityOpt, "no-new-privileges")
	require.Contains(t, spec.HostConfig.SecurityOpt, seccompOpt)
	require.NotContains(t, seccompOpt, "\n", "the profile is sent compacted")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
