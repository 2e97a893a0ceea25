package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestBenchValidateCLI measures `agentctl validate` on the seed specs as a
// user runs it (a fresh process each time) against the baseline of the same
// binary printing --version, so process start-up is visible separately.
func TestBenchValidateCLI(t *testing.T) {
	if os.Getenv("AGENTFLOW_BENCH") != "1" {
		t.Skip("set AGENTFLOW_BENCH=1 (make bench) to run")
	}
	bin := filepath.Join(t.TempDir(), "agentctl")
	build := exec.Command("go", "build", "-o", bin, "../cmd/agentctl")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build agentctl: %v\n%s", err, out)
	}
	const n = 41
	measure := func(args ...string) time.Duration {
		var d []time.Duration
		for range n {
			start := time.Now()
			if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
				t.Fatalf("agentctl %v: %v\n%s", args, err, out)
			}
			d = append(d, time.Since(start))
		}
		slices.Sort(d)
		return d[n/2]
	}
	base := measure("--version")
	seedA := measure("validate", "-f", "../specs/complaint-handler.yaml")
	seedB := measure("validate", "-f", "../specs/daily-tech-news.yaml")
	t.Logf("median of %d runs: agentctl --version %v (baseline)", n, base)
	t.Logf("validate complaint-handler.yaml %v (%.2fx baseline)", seedA, float64(seedA)/float64(base))
	t.Logf("validate daily-tech-news.yaml   %v (%.2fx baseline)", seedB, float64(seedB)/float64(base))
}
