//go:build integration

package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker"
)

// TestSandboxRuntimeBench measures the same full sandbox cycle as
// TestSandboxCycleBench (provision → exec of /bin/tool with 1 KiB JSON →
// checkpoint → terminate) under runc and under gVisor (runsc) in the same
// run, interleaved so load hits both alike, and prints medians and the
// ratio runsc/runc. runsc must be registered (scripts/install-runsc.sh).
//
//	AGENTFLOW_BENCH=1 go test -tags integration -run TestSandboxRuntimeBench -v ./bench/
func TestSandboxRuntimeBench(t *testing.T) {
	if os.Getenv("AGENTFLOW_BENCH") != "1" {
		t.Skip("set AGENTFLOW_BENCH=1 to run the sandbox benchmark")
	}
	c, img := benchDocker(t)
	ctx := t.Context()
	runtimes := []string{"runc", "runsc"}
	hosts := map[string]*docker.Host{}
	store, err := sealedStore(t.TempDir())
	require.NoError(t, err)
	for _, rt := range runtimes {
		require.NoError(t, docker.CheckRuntime(ctx, c, rt))
		h, err := docker.New(docker.Options{Client: c, Store: store, Runtime: rt})
		require.NoError(t, err)
		hosts[rt] = h
	}
	n := 10
	if v, err := strconv.Atoi(os.Getenv("AGENTFLOW_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	payload := payload1K()
	seq := 0
	cycle := func(rt string) (time.Duration, error) {
		seq++
		host := hosts[rt]
		id := exechost.ExecutionID(fmt.Sprintf("bench-rt-%d-%s-%d", os.Getpid(), rt, seq))
		start := time.Now()
		x, err := host.Provision(ctx, exechost.ProvisionRequest{ExecutionID: id, Image: img.ID, Resources: sandboxLimits,
			Labels: map[string]string{"agentflow.test": "1"}})
		if err != nil {
			return 0, err
		}
		defer host.Terminate(context.Background(), x.ExecutionID)
		res, err := host.Exec(ctx, id, exechost.ExecRequest{Command: []string{"/bin/tool"}, Stdin: payload, Timeout: time.Minute})
		if err != nil {
			return 0, err
		}
		if res.ExitCode != 0 || !bytes.Contains(res.Stdout, []byte(`"text"`)) {
			return 0, fmt.Errorf("%s: tool: exit %d: %s %s", rt, res.ExitCode, res.Stdout, res.Stderr)
		}
		ck, err := host.Checkpoint(ctx, id, exechost.CheckpointRequest{})
		if err != nil {
			return 0, err
		}
		defer store.Delete(context.Background(), ck.CheckpointID)
		if err := host.Terminate(ctx, id); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	}
	for _, rt := range runtimes { // warm up
		_, err := cycle(rt)
		require.NoError(t, err)
	}
	durs := map[string][]time.Duration{}
	for range n {
		for _, rt := range runtimes {
			d, err := cycle(rt)
			require.NoError(t, err)
			durs[rt] = append(durs[rt], d)
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nsandbox step cycle by OCI runtime (image %s, 1 KiB JSON stdin, sequential, n=%d each)\n", sandboxBenchImage, n)
	fmt.Fprintf(&sb, "%-8s %14s %14s %14s %8s\n", "runtime", "median", "min", "max", "vs runc")
	base := median(durs["runc"])
	for _, rt := range runtimes {
		d := durs[rt]
		lo, hi := d[0], d[0]
		for _, x := range d {
			lo, hi = min(lo, x), max(hi, x)
		}
		fmt.Fprintf(&sb, "%-8s %14s %14s %14s %8.2f\n", rt, median(d).Round(time.Millisecond), lo.Round(time.Millisecond),
			hi.Round(time.Millisecond), float64(median(d))/float64(base))
	}
	t.Log(sb.String())
	fmt.Print(sb.String())
}
