package engine

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/exechost/gitsource"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/internal/tracing"
	"github.com/agentflow/agentflow/webhook"
	"github.com/agentflow/agentflow/worker"
	"github.com/agentflow/agentflow/workflows"
)

// workerFlags are the flags `worker` and `dev` share.
type workerFlags struct {
	TaskQueue          string
	HealthAddr         string
	MetricsAddr        string
	WebhookURLs        []string
	WebhookSecretFile  string
	MaxConcurrentSteps int
	Store              string
	// StopTimeout: how long a stopping worker waits for running steps.
	StopTimeout   time.Duration
	CheckpointDir string
	// CheckpointKeyFile and InsecureUnsignedCheckpoints: checkpoint manifest signing.
	CheckpointKeyFile           string
	InsecureUnsignedCheckpoints bool
	LogDir                      string
	ResultDir                   string
	LogLevel                    string
	LogFormat                   string
	SandboxLabels               []string
	GPUPolicy                   string
	GPUs                        string
	CPUBudget                   string
	MemoryBudget                string
	GitRoots                    []string
	Preflight                   string
	// Secret sources the operator allows (nothing by default).
	SecretEnvAllow      []string
	SecretFileRoots     []string
	SecretVaultPrefixes []string
	// Runtime: OCI runtime of every sandbox.
	Runtime string
	// PullRegistries bound where missing step images are pulled from.
	PullRegistries []string
	// The egress boundary (docs/security/egress.md).
	Egress               bool
	EgressProxyImage     string
	EgressNetwork        string
	EgressAllowCIDRs     []string
	EgressCAFile         string
	EgressResolve        []string
	EgressMaxConnections int
	// The warm sandbox pool (exechost/docker pool.go).
	WarmPool     int
	WarmPoolIdle time.Duration
	// Retention (internal/gc).
	GCEvery     time.Duration
	GCOlderThan time.Duration
	// vault:// backends (worker_vault.go).
	Vault vaultFlags
}

func (f *workerFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.TaskQueue, "task-queue", workflows.TaskQueue, "Temporal task queue to poll")
	fl.StringVar(&f.HealthAddr, "health-addr", worker.DefaultHealthAddr, `listen address of /healthz ("-" disables)`)
	fl.StringVar(&f.MetricsAddr, "metrics-addr", worker.DefaultMetricsAddr, `listen address of Prometheus /metrics (may equal --health-addr; "-" disables)`)
	fl.StringArrayVar(&f.WebhookURLs, "webhook-url", nil, "POST a JSON event here when any run ends (repeatable)")
	fl.StringVar(&f.WebhookSecretFile, "webhook-secret-file", "",
		"file holding the shared secret (at least 16 bytes, mode 0600) that signs every webhook delivery: headers X-Agentflow-Timestamp and X-Agentflow-Signature-256 (sha256=HMAC of timestamp + \".\" + body; package webhook verifies); unset: deliveries are unsigned")
	fl.IntVar(&f.MaxConcurrentSteps, "max-concurrent-steps", worker.DefaultMaxConcurrentSteps, "steps (sandboxes) this worker runs at once")
	fl.StringVar(&f.Store, "store", os.Getenv("AGENTFLOW_STORE"),
		`shared object store of checkpoints, logs and attempt results, so any worker can continue any step: s3://BUCKET[/PREFIX] (endpoint and credentials from AWS_ENDPOINT_URL[_S3], AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION) or file:///DIR; needs --checkpoint-key-file (env AGENTFLOW_STORE; default: the local --checkpoint-dir, --log-dir and --result-dir)`)
	fl.DurationVar(&f.StopTimeout, "stop-timeout", worker.DefaultStopTimeout,
		"on SIGTERM/SIGINT, how long the worker waits for running steps before it gives them up")
	fl.StringVar(&f.CheckpointDir, "checkpoint-dir", worker.DefaultCheckpointDir, "local checkpoint store directory (without --store)")
	fl.StringVar(&f.CheckpointKeyFile, "checkpoint-key-file", "",
		`file of checkpoint signing keys, one "<id> <base64 secret>" a line, the first signing (mode 0600; default: a key generated in the worker's data dir, for a worker whose checkpoints no other worker reads)`)
	fl.BoolVar(&f.InsecureUnsignedCheckpoints, "insecure-unsigned-checkpoints", false,
		"also restore legacy unsigned (schema 1) checkpoints: anyone who can write the store can forge those")
	fl.StringVar(&f.LogDir, "log-dir", envOr("AGENTFLOW_LOG_DIR", worker.DefaultLogDir), "local step log directory, read by agentctl logs (env AGENTFLOW_LOG_DIR)")
	fl.StringVar(&f.ResultDir, "result-dir", "", `local directory of attempt results, without --store (default: "results" next to --checkpoint-dir, .data/results)`)
	f.Vault.register(fl)
	fl.StringArrayVar(&f.SandboxLabels, "sandbox-label", nil, "KEY=VALUE label added to every sandbox (repeatable)")
	fl.StringVar(&f.GPUPolicy, "gpu-policy", string(activities.GPUPolicyRequire),
		"steps that request a GPU on a host without a GPU runtime: require (fail them) | ignore (run them without a GPU, with "+activities.EnvGPUIgnored+"=1)")
	fl.StringVar(&f.CPUBudget, "cpu-budget", "",
		`CPUs the sandboxes of running steps may use together, counted by each step's resources.cpu: a number ("4", "1500m") or auto (the host's); a step waits, and the worker stops taking steps, while it does not fit ("": no budget)`)
	fl.StringVar(&f.MemoryBudget, "memory-budget", "",
		`memory the sandboxes of running steps may use together, by each step's resources.memory: a size ("16Gi") or auto (the host's MemTotal) ("": no budget)`)
	fl.StringVar(&f.GPUs, "gpus", "auto",
		"the GPUs this worker serves GPU steps (task queue <task-queue>-gpu) on, each step pinned to its own devices: N (devices 0..N-1), device=ID[,ID...] (indexes or UUIDs), 0 (never poll that queue) or auto (the host's GPUs with an nvidia runtime, by nvidia-smi -L; with --gpu-policy ignore and no runtime, --max-concurrent-steps of them, unpinned; else 0)")
	fl.StringArrayVar(&f.GitRoots, "git-root", nil,
		"directory git workspaces may be imported from (repeatable; absolute, no symlinks); none: git import is refused")
	fl.StringVar(&f.Preflight, "preflight", string(worker.PreflightEnforce),
		"sandbox checks at start (seccomp, masked /proc, cwd escape, …): enforce (refuse to serve on failure) | warn | off")
	fl.StringArrayVar(&f.SecretEnvAllow, "secret-env-allow", nil, "env://NAME secrets may read worker variables whose name matches this glob (repeatable; worker settings such as TEMPORAL_*, AGENTFLOW_*, VAULT_*, AWS_* never)")
	fl.StringArrayVar(&f.SecretFileRoots, "secret-file-root", nil, "file:// secrets may read regular files under this directory, symlinks staying inside it (repeatable; never /proc, /sys, /dev)")
	fl.StringArrayVar(&f.SecretVaultPrefixes, "secret-vault-prefix", nil, "vault:// secrets may read paths under this prefix, by whole segments, checked on the resolved KV mount and path: prod/slack (mount --vault-kv-mount) or kv/data/prod (mount kv) (repeatable)")
	fl.StringVar(&f.Runtime, "runtime", "", `OCI runtime of every sandbox: runc, runsc (gVisor, a user-space kernel) or any runtime the Docker daemon registers ("" = the daemon's default); the worker refuses to start when it is not registered`)
	fl.StringArrayVar(&f.PullRegistries, "pull-registry", nil,
		"registry (host[:port] as image references name it; docker.io for Docker Hub) a missing repo@sha256 step image may be pulled from (repeatable); none: any registry the Docker daemon reaches. Credentials come from the worker's Docker config ($DOCKER_CONFIG or ~/.docker)")
	fl.BoolVar(&f.Egress, "egress", true, "serve steps that declare egress (their own network and egress proxy); false: such steps fail with a policy error")
	fl.StringVar(&f.EgressProxyImage, "egress-proxy-image", worker.DefaultEgressProxyImage, "image of the per-sandbox egress proxy (built by make images); missing: no egress is served")
	fl.StringVar(&f.EgressNetwork, "egress-network", docker.DefaultEgressNetwork, "Docker network the egress proxies reach upstreams on")
	fl.StringArrayVar(&f.EgressAllowCIDRs, "egress-allow-cidr", nil,
		"private range (CIDR) upstreams may be in, for internal services (repeatable); private ranges are refused otherwise, and loopback, link-local (cloud metadata), multicast and the Docker host always")
	fl.StringVar(&f.EgressCAFile, "egress-ca-file", "", "PEM file of CAs the egress proxy and sandboxes trust for upstreams, besides the worker's system roots")
	fl.StringArrayVar(&f.EgressResolve, "egress-resolve", nil,
		"NAME=ADDRESS: the egress proxy resolves NAME to ADDRESS (repeatable; for tests against local upstreams: the address is still checked like any resolved one)")
	fl.IntVar(&f.EgressMaxConnections, "egress-max-connections", exechost.DefaultEgressConns, "connections one sandbox may open through its egress proxy")
	fl.IntVar(&f.WarmPool, "warm-pool", 0,
		"pre-started sandboxes kept per pool key (image and limits of steps seen recently; network none, no GPU, no git workspace), each serving one attempt; 0: off")
	fl.DurationVar(&f.WarmPoolIdle, "warm-pool-idle", docker.DefaultPoolMaxIdle,
		fmt.Sprintf("how long a pre-started sandbox may wait to be taken before it is replaced; a pooled sandbox's in-container deadline is this much past its runtime (at most %s)", maxWarmPoolIdle))
	fl.DurationVar(&f.GCEvery, "gc-every", 0,
		"delete the checkpoints, logs and attempt records of runs past --gc-older-than this often (what agentctl gc does); 0: never")
	f.GCOlderThan = worker.DefaultGCOlderThan
	fl.Var(retentionFlag{&f.GCOlderThan}, "gc-older-than", "retention of --gc-every: runs closed longer ago than this lose their state (Go duration or days, e.g. 30d)")
	fl.StringVar(&f.LogLevel, "log-level", "info", "debug|info|warn|error")
	fl.StringVar(&f.LogFormat, "log-format", "text", "text|json")
}

func (f *workerFlags) config(opts *Options, errOut io.Writer) (worker.Config, error) {
	if f.StopTimeout <= 0 {
		return worker.Config{}, usageErr("--stop-timeout must be positive")
	}
	if f.MaxConcurrentSteps < 1 {
		return worker.Config{}, usageErr("--max-concurrent-steps must be at least 1")
	}
	switch {
	case f.WarmPool < 0 || f.WarmPool > maxWarmPool:
		return worker.Config{}, usageErr("--warm-pool must be between 0 and %d", maxWarmPool)
	case f.WarmPoolIdle < time.Second || f.WarmPoolIdle > maxWarmPoolIdle:
		return worker.Config{}, usageErr("--warm-pool-idle must be between 1s and %s", maxWarmPoolIdle)
	}
	switch {
	case f.GCEvery < 0:
		return worker.Config{}, usageErr("--gc-every must not be negative")
	case f.GCEvery > 0 && f.GCOlderThan <= 0:
		return worker.Config{}, usageErr("--gc-older-than must be positive")
	}
	logger, err := newLogger(errOut, f.LogLevel, f.LogFormat)
	if err != nil {
		return worker.Config{}, err
	}
	gpuPolicy, err := activities.ParseGPUPolicy(f.GPUPolicy)
	if err != nil {
		return worker.Config{}, usageErr("--gpu-policy: %v", err)
	}
	gpus, gpuDevices, err := parseGPUs(f.GPUs)
	if err != nil {
		return worker.Config{}, err
	}
	cpuBudget, err := parseBudget("--cpu-budget", f.CPUBudget, spec.ParseCPU)
	if err != nil {
		return worker.Config{}, err
	}
	memBudget, err := parseBudget("--memory-budget", f.MemoryBudget, spec.ParseSize)
	if err != nil {
		return worker.Config{}, err
	}
	if _, err := gitsource.New(gitsource.Config{Roots: f.GitRoots}); err != nil {
		return worker.Config{}, usageErr("--git-root: %v", err)
	}
	if err := docker.CheckPullRegistries(f.PullRegistries); err != nil {
		return worker.Config{}, usageErr("--pull-registry: %v", err)
	}
	preflight, err := worker.ParsePreflightMode(f.Preflight)
	if err != nil {
		return worker.Config{}, usageErr("--preflight: %v", err)
	}
	var webhookSecret []byte
	if f.WebhookSecretFile != "" {
		if webhookSecret, err = webhook.LoadSecret(f.WebhookSecretFile); err != nil {
			return worker.Config{}, usageErr("--webhook-secret-file: %v", err)
		}
	}
	if err := worker.CheckSharedStore(f.Store, f.CheckpointKeyFile); err != nil {
		return worker.Config{}, usageErr("%v", err)
	}
	if err := tracing.CheckEnv(os.Getenv); err != nil {
		return worker.Config{}, usageErr("tracing: %v", err)
	}
	// A bad codec key file is invalid input: found here, before anything starts.
	if _, err := loadCodec(opts); err != nil {
		return worker.Config{}, err
	}
	policy := secrets.Policy{EnvAllow: f.SecretEnvAllow, FileRoots: f.SecretFileRoots, VaultPrefixes: f.SecretVaultPrefixes}
	if err := policy.Check(); err != nil {
		return worker.Config{}, usageErr("%v", err)
	}
	egress, err := f.egressConfig()
	if err != nil {
		return worker.Config{}, err
	}
	var vaultCfg worker.Config
	if err := f.Vault.config(&vaultCfg); err != nil {
		return worker.Config{}, err
	}
	labels := map[string]string{}
	for _, kv := range f.SandboxLabels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return worker.Config{}, usageErr("invalid --sandbox-label %q: want KEY=VALUE", kv)
		}
		labels[k] = v
	}
	return worker.Config{
		Address:                     opts.Address,
		Namespace:                   opts.Namespace,
		Security:                    opts.Security,
		TaskQueue:                   f.TaskQueue,
		HealthAddr:                  f.HealthAddr,
		MetricsAddr:                 f.MetricsAddr,
		WebhookURLs:                 f.WebhookURLs,
		WebhookSecret:               webhookSecret,
		MaxConcurrentSteps:          f.MaxConcurrentSteps,
		Store:                       f.Store,
		StopTimeout:                 f.StopTimeout,
		CheckpointDir:               f.CheckpointDir,
		CheckpointKeyFile:           f.CheckpointKeyFile,
		InsecureUnsignedCheckpoints: f.InsecureUnsignedCheckpoints,
		CodecKeyFile:                opts.CodecKeyFile,
		LogDir:                      f.LogDir,
		ResultDir:                   f.ResultDir,
		DevVaultDir:                 vaultCfg.DevVaultDir,
		Vault:                       vaultCfg.Vault,
		VaultKVMount:                vaultCfg.VaultKVMount,
		Logger:                      logger,
		SandboxLabels:               labels,
		GPUPolicy:                   gpuPolicy,
		GPUs:                        gpus,
		GPUDevices:                  gpuDevices,
		CPUBudget:                   cpuBudget,
		MemoryBudget:                memBudget,
		GitRoots:                    f.GitRoots,
		Preflight:                   preflight,
		SecretPolicy:                policy,
		Runtime:                     f.Runtime,
		PullRegistries:              f.PullRegistries,
		Egress:                      egress,
		WarmPool:                    f.WarmPool,
		WarmPoolIdle:                f.WarmPoolIdle,
		GCEvery:                     f.GCEvery,
		GCOlderThan:                 f.GCOlderThan,
	}, nil
}

// parseGPUs maps --gpus to worker.Config.GPUs and GPUDevices.
func parseGPUs(s string) (int, []string, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "auto", "":
		return worker.GPUsAuto, nil, nil
	case "0":
		return worker.GPUsNone, nil, nil
	}
	if list, ok := strings.CutPrefix(s, "device="); ok {
		ids := strings.Split(list, ",")
		seen := map[string]bool{}
		for _, id := range ids {
			if err := exechost.CheckGPUDevice(id); err != nil {
				return 0, nil, usageErr("--gpus %q: %v", s, err)
			}
			if seen[id] {
				return 0, nil, usageErr("--gpus %q: device %s listed twice", s, id)
			}
			seen[id] = true
		}
		if len(ids) > maxGPUs {
			return 0, nil, usageErr("--gpus %q: more than %d devices", s, maxGPUs)
		}
		return len(ids), ids, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > maxGPUs {
		return 0, nil, usageErr("--gpus %q: want auto, 0, a count up to %d or device=ID[,ID...]", s, maxGPUs)
	}
	return n, nil, nil
}

// parseBudget maps --cpu-budget / --memory-budget: "" none, auto, or a
// quantity in the spec's units.
func parseBudget(flag, s string, parse func(string) (int64, error)) (int64, error) {
	switch s = strings.TrimSpace(s); s {
	case "":
		return 0, nil
	case "auto":
		return worker.BudgetAuto, nil
	}
	n, err := parse(s)
	if err != nil || n <= 0 {
		return 0, usageErr("%s %q: want auto or a positive quantity", flag, s)
	}
	return n, nil
}

// maxGPUs bounds --gpus: more than any one machine has.
const maxGPUs = 64

// Bounds of the warm pool flags: a pooled sandbox's in-container deadline
// (the backstop with no worker alive) runs --warm-pool-idle past its
// runtime, so that stays short.
const (
	maxWarmPool     = 64
	maxWarmPoolIdle = 10 * time.Minute
)

// egressConfig checks the egress flags (usage errors, exit 2).
func (f *workerFlags) egressConfig() (worker.EgressConfig, error) {
	cfg := worker.EgressConfig{Disabled: !f.Egress, ProxyImage: f.EgressProxyImage, Network: f.EgressNetwork,
		CAFile: f.EgressCAFile, MaxConnections: f.EgressMaxConnections}
	if f.EgressNetwork == "" {
		return cfg, usageErr("--egress-network must name a Docker network")
	}
	if f.EgressMaxConnections < 1 {
		return cfg, usageErr("--egress-max-connections must be at least 1")
	}
	for _, s := range f.EgressAllowCIDRs {
		p, err := worker.ParseEgressAllowCIDR(s)
		if err != nil {
			return cfg, usageErr("%v", err)
		}
		cfg.AllowCIDRs = append(cfg.AllowCIDRs, p)
	}
	if f.EgressCAFile != "" {
		if err := worker.CheckEgressCAFile(f.EgressCAFile); err != nil {
			return cfg, usageErr("%v", err)
		}
	}
	for _, s := range f.EgressResolve {
		name, addr, err := worker.ParseEgressResolve(s)
		if err != nil {
			return cfg, usageErr("%v", err)
		}
		if cfg.Resolve == nil {
			cfg.Resolve = map[string]string{}
		}
		cfg.Resolve[name] = addr
	}
	return cfg, nil
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErr("invalid --log-level %q: want debug, info, warn or error", level)
	}
	hopts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, hopts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, hopts)), nil
	default:
		return nil, usageErr("invalid --log-format %q: want text or json", format)
	}
}

func newWorkerCmd(opts *Options) *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use: "worker",
		Long: `Run the agentflow worker: it polls the Temporal task queue, interprets
AgentWorkflow runs and executes each step in a hardened Docker sandbox. It
serves /healthz ({"status":"ok"} only when Temporal and Docker answer) and
Prometheus /metrics, reaps orphaned sandboxes at start and every minute, and
on SIGTERM stops taking work and waits for running steps (up to 30 s).

Secrets are resolved on the worker, and only those its operator allows
(nothing by default): env://VAR from its environment when VAR matches a
--secret-env-allow pattern, file:///path when the path is under a
--secret-file-root, vault://path/key from Vault (--vault-addr) or the
development --dev-vault-dir when the path is under a --secret-vault-prefix.
Worker settings (TEMPORAL_*, AGENTFLOW_*, VAULT_*, AWS_*, DOCKER_*, HOME,
PATH, ...) and anything under /proc, /sys, /dev are never resolved. A
refused secret fails its step with PolicyViolation; a Vault that cannot
answer fails the attempt with SecretUnavailable, retried like any
infrastructure failure.

` + vaultHelp + `

A step that requests GPUs (resources.gpu) on a worker whose Docker daemon has
no nvidia runtime fails at once with a policy error (--gpu-policy require, the
default); with --gpu-policy ignore it runs without a GPU, a warning is logged
and the tool sees AGENTFLOW_GPU_IGNORED=1.

Checkpoints, logs and attempt results live in local directories by default;
with --store s3://BUCKET[/PREFIX] they live in one shared bucket, so N
workers on N machines (one task queue) can each run, retry or resume any
step. Every worker on a store needs the same --checkpoint-key-file
(docs/DEPLOY.md).`,
		Example: `  agentctl worker
  agentctl worker --max-concurrent-steps 8 --metrics-addr :9100 --webhook-url http://127.0.0.1:9999/hook
  TEMPORAL_ADDRESS=temporal.internal:7233 agentctl worker --vault-addr https://vault.internal:8200 --vault-token-file /run/vault/token --vault-ca-cert /etc/agentflow/vault-ca.pem --secret-vault-prefix prod/slack
  agentctl worker --vault-addr https://vault.internal:8200 --vault-approle-role-id-file /run/vault/role-id --vault-approle-secret-id-file /run/vault/secret-id --secret-vault-prefix prod
  agentctl worker --dev-vault-dir .data/vault --secret-vault-prefix prod/slack   # development: files, no Vault server
  agentctl worker --secret-env-allow 'SLACK_*' --secret-file-root /run/secrets
  agentctl worker --runtime runsc   # every step under gVisor (scripts/install-runsc.sh registers it)
  agentctl worker --gpu-policy ignore   # a laptop without GPUs runs GPU steps on the CPU
  AWS_ENDPOINT_URL=http://minio.internal:9000 agentctl worker --store s3://agentflow/prod --checkpoint-key-file /etc/agentflow/checkpoint.keys`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config(opts, opts.Streams.Err)
			if err != nil {
				return err
			}
			if err := worker.Run(cmd.Context(), cfg); err != nil {
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("worker: %w", err)}
			}
			return nil
		},
	}
	f.register(cmd)
	return cmd
}
