package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// envInt is a positive integer from the environment, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// procCPU is a process's user+system CPU seconds (/proc/<pid>/stat).
func procCPU(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64) // field 14
	stime, _ := strconv.ParseFloat(f[12], 64) // field 15
	cutime, _ := strconv.ParseFloat(f[13], 64)
	cstime, _ := strconv.ParseFloat(f[14], 64)
	return (utime + stime + cutime + cstime) / 100 // USER_HZ
}

// procPeakRSS is a process's peak resident set (VmHWM), in MiB.
func procPeakRSS(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
