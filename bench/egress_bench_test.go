//go:build integration

package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker"
)

const egressProxyImage = "agentflow/egress-proxy:latest"

// TestEgressCycleBench measures what the egress boundary costs a step: the
// sandbox cycle (provision → exec of a tool with 1 KiB JSON → terminate)
// with `egress:` (its own internal network and proxy container; one rule
// without headers, and one with headers, which adds the per-sandbox CA and
// its bundle in the sandbox) against the same cycle with network none,
// interleaved in one run so machine load hits all three alike.
//
//	AGENTFLOW_BENCH=1 go test -tags integration -run TestEgressCycleBench -v ./bench/
func TestEgressCycleBench(t *testing.T) {
	if os.Getenv("AGENTFLOW_BENCH") != "1" {
		t.Skip("set AGENTFLOW_BENCH=1 to run the egress benchmark")
	}
	c, img := benchDocker(t)
	ctx := t.Context()
	proxy, err := c.ImageInspect(ctx, egressProxyImage)
	require.NoError(t, err, "run `make images` first")
	store, err := sealedStore(t.TempDir())
	require.NoError(t, err)
	host, err := docker.New(docker.Options{Client: c, Store: store,
		Egress: docker.EgressOptions{ProxyImage: proxy.ID, Network: "bridge"}})
	require.NoError(t, err)

	n := benchRounds(8)
	payload := payload1K()
	seq := 0
	cycle := func(eg *exechost.EgressPolicy) func() error {
		return func() error {
			seq++
			id := exechost.ExecutionID(fmt.Sprintf("bench-egress-%d-%d", os.Getpid(), seq))
			req := exechost.ProvisionRequest{ExecutionID: id, Image: img.ID, Resources: sandboxLimits,
				Labels: map[string]string{"agentflow.test": "1"}}
			if eg != nil {
				req.Network, req.Egress = exechost.NetworkEgress, eg
			}
			if _, err := host.Provision(ctx, req); err != nil {
				return err
			}
			defer host.Terminate(context.Background(), id)
			res, err := host.Exec(ctx, id, exechost.ExecRequest{Command: []string{"/bin/tool"}, Stdin: payload, Timeout: time.Minute})
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return fmt.Errorf("tool: exit %d: %s", res.ExitCode, res.Stderr)
			}
			return host.Terminate(ctx, id)
		}
	}
	none := cycle(nil)
	plain := cycle(&exechost.EgressPolicy{Rules: []exechost.EgressRule{{Host: "example.com", Port: 443}}, MaxBytes: exechost.DefaultEgressBytes})
	brokered := cycle(&exechost.EgressPolicy{Rules: []exechost.EgressRule{{Host: "example.com", Port: 443,
		Headers: map[string]string{"Authorization": "Bearer bench"}}}, MaxBytes: exechost.DefaultEgressBytes})

	// The floor: the same shape with the docker CLI and nothing of ours
	// (an internal network, a second container on it and on the bridge,
	// a hardened `docker run --rm -i` of the tool on the internal network,
	// then the second container and the network removed).
	bareNet := func() error {
		seq++
		name := fmt.Sprintf("bench-egress-bare-%d-%d", os.Getpid(), seq)
		run := func(args ...string) error {
			out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("docker %s: %v: %s", args[0], err, out)
			}
			return nil
		}
		if err := run("network", "create", "--internal", "--label", "agentflow.test=1",
			"-o", "com.docker.network.bridge.inhibit_ipv4=true", name); err != nil {
			return err
		}
		defer run("network", "rm", name)
		if err := run("create", "--name", name+"-peer", "--label", "agentflow.test=1", "--read-only", "--cap-drop", "ALL",
			"--network", "bridge", img.ID, "sleep", "60"); err != nil {
			return err
		}
		defer run("rm", "-f", name+"-peer")
		if err := run("network", "connect", name, name+"-peer"); err != nil {
			return err
		}
		if err := run("start", name+"-peer"); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, "docker", "run", "--rm", "-i", "--label", "agentflow.test=1",
			"--read-only", "--network", name, "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
			"--user", "65532:65532", "--workdir", "/workspace", "--cpus", "1",
			"--memory", strconv.FormatInt(sandboxLimits.MemoryBytes, 10), "--pids-limit", strconv.FormatInt(sandboxLimits.Pids, 10),
			"--tmpfs", "/workspace:rw,exec,nosuid,nodev,size=67108864,uid=65532,gid=65532,mode=0700", img.ID)
		cmd.Stdin = bytes.NewReader(payload)
		if out, err := cmd.CombinedOutput(); err != nil || !bytes.Contains(out, []byte(`"text"`)) {
			return fmt.Errorf("docker run: %v: %s", err, out)
		}
		if err := run("rm", "-f", name+"-peer"); err != nil {
			return err
		}
		return run("network", "rm", name)
	}

	for _, f := range []func() error{none, plain, brokered, bareNet} { // warm up
		require.NoError(t, f())
	}
	var dn, dp, db, dbare []time.Duration
	for range n {
		for _, x := range []struct {
			f func() error
			d *[]time.Duration
		}{{none, &dn}, {plain, &dp}, {brokered, &db}, {bareNet, &dbare}} {
			s := time.Now()
			require.NoError(t, x.f())
			*x.d = append(*x.d, time.Since(s))
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nsandbox cycle with egress vs network none (image %s, sequential, n=%d)\n", sandboxBenchImage, n)
	fmt.Fprintf(&sb, "%-28s %10s %7s\n", "mode", "median", "vs none")
	base := median(dn)
	for _, r := range []struct {
		name string
		d    []time.Duration
	}{{"network none (baseline)", dn}, {"egress, 1 rule", dp}, {"egress, 1 rule with headers", db}, {"bare docker, same shape", dbare}} {
		m := median(r.d)
		fmt.Fprintf(&sb, "%-28s %10s %7.2f\n", r.name, m.Round(time.Millisecond), float64(m)/float64(base))
	}
	fmt.Fprintf(&sb, "egress cycle vs the bare docker floor of the same shape: %.2f\n", float64(median(dp))/float64(median(dbare)))
	t.Log(sb.String())
	fmt.Print(sb.String())
}
