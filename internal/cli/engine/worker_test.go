package engine

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/worker"
)

func TestWorkerAndDevUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "worker zero concurrency", args: []string{"worker", "--max-concurrent-steps", "0"}, want: "--max-concurrent-steps"},
		{name: "worker zero stop timeout", args: []string{"worker", "--stop-timeout", "0s"}, want: "--stop-timeout"},
		{name: "worker bad log level", args: []string{"worker", "--log-level", "loud"}, want: "--log-level"},
		{name: "worker bad log format", args: []string{"worker", "--log-format", "xml"}, want: "--log-format"},
		{name: "worker positional arg", args: []string{"worker", "extra"}, want: "unknown command"},
		{name: "worker unknown flag", args: []string{"worker", "--nope"}, want: "unknown flag"},
		{name: "worker bad sandbox label", args: []string{"worker", "--sandbox-label", "novalue"}, want: "--sandbox-label"},
		{name: "worker bad gpu policy", args: []string{"worker", "--gpu-policy", "fallback"}, want: "--gpu-policy"},
		{name: "dev bad gpu policy", args: []string{"dev", "--gpu-policy", "maybe"}, want: "--gpu-policy"},
		{name: "worker relative git root", args: []string{"worker", "--git-root", "repos"}, want: "--git-root"},
		{name: "worker missing git root", args: []string{"worker", "--git-root", "/nonexistent/agentflow-git-root"}, want: "--git-root"},
		{name: "worker pull registry with scheme", args: []string{"worker", "--pull-registry", "https://ghcr.io"}, want: "--pull-registry"},
		{name: "dev pull registry with path", args: []string{"dev", "--pull-registry", "ghcr.io/org"}, want: "--pull-registry"},
		{name: "dev relative git root", args: []string{"dev", "--git-root", "./repos"}, want: "--git-root"},
		{name: "worker shared store without key", args: []string{"worker", "--store", "s3://bucket/prefix"}, want: "--checkpoint-key-file"},
		{name: "dev shared store without key", args: []string{"dev", "--store", "s3://bucket"}, want: "--checkpoint-key-file"},
		{name: "worker egress cidr everything", args: []string{"worker", "--egress-allow-cidr", "0.0.0.0/0"}, want: "whole address space"},
		{name: "worker egress cidr v6 everything", args: []string{"worker", "--egress-allow-cidr", "::/0"}, want: "whole address space"},
		{name: "worker egress cidr metadata", args: []string{"worker", "--egress-allow-cidr", "169.254.169.254/32"}, want: "link-local"},
		{name: "worker egress cidr covering loopback", args: []string{"worker", "--egress-allow-cidr", "96.0.0.0/3"}, want: "loopback"},
		{name: "worker egress cidr junk", args: []string{"worker", "--egress-allow-cidr", "10.0.0.0/33"}, want: "--egress-allow-cidr"},
		{name: "dev egress cidr multicast", args: []string{"dev", "--egress-allow-cidr", "239.0.0.0/8"}, want: "multicast"},
		{name: "worker egress resolve without address", args: []string{"worker", "--egress-resolve", "api.example.com"}, want: "NAME=ADDRESS"},
		{name: "worker egress resolve bad address", args: []string{"worker", "--egress-resolve", "api.example.com=localhost"}, want: "--egress-resolve"},
		{name: "worker egress resolve wildcard", args: []string{"worker", "--egress-resolve", "*.example.com=10.0.0.1"}, want: "not a host name"},
		{name: "worker egress resolve ip name", args: []string{"worker", "--egress-resolve", "10.0.0.2=10.0.0.1"}, want: "not a host name"},
		{name: "worker egress ca missing", args: []string{"worker", "--egress-ca-file", "/nonexistent/ca.pem"}, want: "--egress-ca-file"},
		{name: "worker egress ca without certificate", args: []string{"worker", "--egress-ca-file", "/etc/hostname"}, want: "no PEM certificate"},
		{name: "worker egress zero connections", args: []string{"worker", "--egress-max-connections", "0"}, want: "--egress-max-connections"},
		{name: "worker egress empty network", args: []string{"worker", "--egress-network", ""}, want: "--egress-network"},
		{name: "worker negative warm pool", args: []string{"worker", "--warm-pool", "-1"}, want: "--warm-pool"},
		{name: "worker huge warm pool", args: []string{"worker", "--warm-pool", "1000"}, want: "--warm-pool"},
		{name: "worker zero warm pool idle", args: []string{"worker", "--warm-pool", "2", "--warm-pool-idle", "0s"}, want: "--warm-pool-idle"},
		{name: "dev long warm pool idle", args: []string{"dev", "--warm-pool-idle", "1h"}, want: "--warm-pool-idle"},
		{name: "worker webhook secret missing", args: []string{"worker", "--webhook-secret-file", "/nonexistent/webhook.secret"}, want: "--webhook-secret-file"},
		{name: "dev webhook secret readable by others", args: []string{"dev", "--webhook-secret-file", "/etc/hostname"}, want: "want 0600"},
		{name: "worker negative gc interval", args: []string{"worker", "--gc-every", "-1h"}, want: "--gc-every"},
		{name: "worker zero gc retention", args: []string{"worker", "--gc-every", "1h", "--gc-older-than", "0s"}, want: "--gc-older-than"},
		{name: "worker bad gc retention", args: []string{"worker", "--gc-older-than", "thirty days"}, want: "--gc-older-than"},
		{name: "gc bad retention", args: []string{"gc", "--older-than", "-3d"}, want: "--older-than"},
		{name: "gc without state dirs", args: []string{"gc", "--checkpoint-dir", "/nonexistent/agentflow/checkpoints"}, want: "no state directory"},
		{name: "gc positional arg", args: []string{"gc", "now"}, want: "unknown command"},
		{name: "dev bad address", args: []string{"--address", "no-port", "dev"}, want: "invalid --address"},
		{name: "dev bad port", args: []string{"--address", "127.0.0.1:http", "dev"}, want: "invalid port"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Run(context.Background(), "test", tc.args, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
			require.Equal(t, ExitInvalid, code, errOut.String())
			require.Contains(t, errOut.String(), tc.want)
		})
	}
}

func TestWorkerHelpListsFlags(t *testing.T) {
	var out bytes.Buffer
	code := Run(context.Background(), "test", []string{"worker", "--help"}, Streams{In: strings.NewReader(""), Out: &out, Err: &out})
	require.Equal(t, ExitOK, code)
	for _, f := range []string{"--task-queue", "--health-addr", "--metrics-addr", "--webhook-url", "--max-concurrent-steps", "--stop-timeout", "--checkpoint-dir", "--log-dir", "--store", "--result-dir", "--dev-vault-dir", "--vault-addr", "--vault-token-file", "--vault-approle-role-id-file", "--vault-approle-secret-id-file", "--vault-namespace", "--vault-ca-cert", "--vault-kv-mount", "--gpu-policy"} {
		require.Contains(t, out.String(), f)
	}
	require.Contains(t, out.String(), "--git-root")
	require.Contains(t, out.String(), "--webhook-secret-file")
	require.Contains(t, out.String(), "--gc-every")
	require.Contains(t, out.String(), "--gc-older-than")
	require.Contains(t, out.String(), "--pull-registry")
	require.Contains(t, out.String(), "--warm-pool")
	require.Contains(t, out.String(), "--warm-pool-idle")
	for _, f := range []string{"--egress", "--egress-proxy-image", "--egress-network", "--egress-allow-cidr", "--egress-ca-file", "--egress-resolve", "--egress-max-connections"} {
		require.Contains(t, out.String(), f)
	}
}

// The webhook and retention flags reach the worker's configuration.
func TestWorkerFlagsWebhookAndGC(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "webhook.secret")
	require.NoError(t, os.WriteFile(secret, []byte("a-webhook-secret-of-some-length\n"), 0o600))
	tests := []struct {
		name      string
		args      []string
		wantEvery time.Duration
		wantOlder time.Duration
		wantSig   string
	}{
		{name: "defaults", args: nil, wantOlder: 30 * 24 * time.Hour},
		{name: "all set", args: []string{"--webhook-url", "http://127.0.0.1:9/hook", "--webhook-secret-file", secret,
			"--gc-every", "6h", "--gc-older-than", "7d"}, wantEvery: 6 * time.Hour, wantOlder: 7 * 24 * time.Hour,
			wantSig: "a-webhook-secret-of-some-length"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f workerFlags
			cmd := &cobra.Command{Use: "worker"}
			f.register(cmd)
			require.NoError(t, cmd.ParseFlags(tc.args))
			cfg, err := f.config(&Options{}, io.Discard)
			require.NoError(t, err)
			require.Equal(t, tc.wantEvery, cfg.GCEvery)
			require.Equal(t, tc.wantOlder, cfg.GCOlderThan)
			require.Equal(t, tc.wantSig, string(cfg.WebhookSecret))
			if tc.wantSig != "" {
				require.Equal(t, []string{"http://127.0.0.1:9/hook"}, cfg.WebhookURLs)
			}
		})
	}
}

// --gpus, --cpu-budget and --memory-budget reach the worker's
// configuration; bad values are usage errors (exit 2).
func TestWorkerFlagsGPUsAndBudget(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		gpus     int
		devices  []string
		cpu, mem int64
		err      string
	}{
		{name: "defaults", gpus: worker.GPUsAuto},
		{name: "declared", args: []string{"--gpus", "2", "--cpu-budget", "1500m", "--memory-budget", "4Gi"}, gpus: 2, cpu: 1_500_000_000, mem: 4 << 30},
		{name: "none and auto", args: []string{"--gpus", "0", "--cpu-budget", "auto", "--memory-budget", "auto"}, gpus: worker.GPUsNone, cpu: worker.BudgetAuto, mem: worker.BudgetAuto},
		{name: "devices", args: []string{"--gpus", "device=1,GPU-3c4d"}, gpus: 2, devices: []string{"1", "GPU-3c4d"}},
		{name: "one device", args: []string{"--gpus", "device=0"}, gpus: 1, devices: []string{"0"}},
		{name: "device twice", args: []string{"--gpus", "device=1,1"}, err: "listed twice"},
		{name: "no device", args: []string{"--gpus", "device="}, err: "GPU device"},
		{name: "device keyword", args: []string{"--gpus", "device=all"}, err: "keyword"},
		{name: "bad gpus", args: []string{"--gpus", "many"}, err: "--gpus"},
		{name: "negative gpus", args: []string{"--gpus", "-1"}, err: "--gpus"},
		{name: "bad cpu", args: []string{"--cpu-budget", "lots"}, err: "--cpu-budget"},
		{name: "zero memory", args: []string{"--memory-budget", "0"}, err: "--memory-budget"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f workerFlags
			cmd := &cobra.Command{Use: "worker"}
			f.register(cmd)
			require.NoError(t, cmd.ParseFlags(tc.args))
			cfg, err := f.config(&Options{}, io.Discard)
			if tc.err != "" {
				var ee *ExitError
				require.ErrorAs(t, err, &ee)
				require.Equal(t, ExitInvalid, ee.Code)
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.gpus, cfg.GPUs)
			require.Equal(t, tc.devices, cfg.GPUDevices)
			require.Equal(t, tc.cpu, cfg.CPUBudget)
			require.Equal(t, tc.mem, cfg.MemoryBudget)
		})
	}
}
