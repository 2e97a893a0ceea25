package worker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/capacity"
)

func TestCapacityPool(t *testing.T) {
	p, err := capacityPool(Config{}, 4, nil)
	require.NoError(t, err)
	require.Nil(t, p, "no budget, no pool")

	p, err = capacityPool(Config{CPUBudget: 2_000_000_000}, 4, nil)
	require.NoError(t, err)
	require.Equal(t, int64(2_000_000_000), p.Budget().NanoCPUs)
	require.Equal(t, int64(capacity.Unbounded), p.Budget().MemoryBytes, "an unset dimension does not bound")
	require.Equal(t, "2.00 CPU, any memory", p.Budget().String())

	p, err = capacityPool(Config{CPUBudget: BudgetAuto, MemoryBudget: BudgetAuto}, 4, nil)
	require.NoError(t, err)
	require.Positive(t, p.Budget().NanoCPUs)
	require.Positive(t, p.Budget().MemoryBytes)

	// GPU devices alone make a pool: CPU and memory unbounded.
	p, err = capacityPool(Config{}, 4, []string{"0", "1"})
	require.NoError(t, err)
	require.Equal(t, "any CPU, any memory, 2 GPUs", p.Budget().String())
	require.Equal(t, []string{"0", "1"}, p.Devices())
}

func TestHostMemory(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		f := filepath.Join(dir, "meminfo")
		require.NoError(t, os.WriteFile(f, []byte(s), 0o600))
		return f
	}
	n, err := hostMemory(write("MemTotal:       24558212 kB\nMemFree:        1000 kB\n"))
	require.NoError(t, err)
	require.Equal(t, int64(24558212)<<10, n)
	_, err = hostMemory(write("MemFree: 1 kB\n"))
	require.ErrorContains(t, err, "no MemTotal")
	_, err = hostMemory(write("MemTotal: lots kB\n"))
	require.ErrorContains(t, err, "bad MemTotal")
}
