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
// user runs it (a fresh process each time, the lean build that `make build`
// installs) against the baseline of the same binary printing --version, so
// process start-up is visible separately; and the full build for contrast.
func TestBenchValidateCLI(t *testing.T) {
	if os.Getenv("AGENTFLOW_BENCH") != "1" {
		t.Skip("set AGENTFLOW_BENCH=1 (make bench) to run")
	}
	dir := t.TempDir()
	bin, engine := filepath.Join(dir, "agentctl"), filepath.Join(dir, "agentctl-engine")
	for _, b := range []struct{ out, pkg string }{{bin, "../cmd/agentctl-lean"}, {engine, "../cmd/agentctl"}} {
		build := exec.Command("go", "build", "-o", b.out, b.pkg)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", b.out, err, out)
		}
	}
	const n = 41
	measureBin := func(bin string, args ...string) time.Duration {
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
	measure := func(args ...string) time.Duration { return measureBin(bin, args...) }
	base := measure("--version")
	seedA := measure("validate", "-f", "../specs/complaint-handler.yaml")
	seedB := measure("validate", "-f", "../specs/daily-tech-news.yaml")
	t.Logf("median of %d runs: agentctl --version %v (baseline)", n, base)
	t.Logf("validate complaint-handler.yaml %v (%.2fx baseline)", seedA, float64(seedA)/float64(base))
	t.Logf("validate daily-tech-news.yaml   %v (%.2fx baseline)", seedB, float64(seedB)/float64(base))
	full := measureBin(engine, "validate", "-f", "../specs/daily-tech-news.yaml")
	t.Logf("same with the full binary (agentctl-engine, links Temporal+Docker): %v (%.2fx baseline)", full, float64(full)/float64(base))
}
