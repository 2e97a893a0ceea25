// Package worker runs the agentflow worker (`agentctl worker`): a Temporal
// worker for AgentWorkflow, the step activities and the tool registry, with
// a Docker execution host, its state stores (local directories, or one
// shared object store: see Stores), bounded concurrent steps, /healthz,
// Prometheus /metrics, periodic reaping of orphaned sandboxes and graceful
// shutdown.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/attemptrec"
	"github.com/agentflow/agentflow/internal/logstore"
	"github.com/agentflow/agentflow/internal/metrics"
	"github.com/agentflow/agentflow/internal/payloadcodec"
	"github.com/agentflow/agentflow/internal/registry"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/temporalconn"
	"github.com/agentflow/agentflow/internal/temporalconn/sdkconn"
	"github.com/agentflow/agentflow/internal/tracing"
	"github.com/agentflow/agentflow/internal/vaultkv"
	"github.com/agentflow/agentflow/workflows"
)

// Defaults for Config fields left zero.
const (
	DefaultHealthAddr         = ":8080"
	DefaultMetricsAddr        = ":9090"
	DefaultMaxConcurrentSteps = 4
	DefaultCheckpointDir      = ".data/checkpoints"
	DefaultLogDir             = logstore.DefaultDir
	// DefaultStopTimeout is how long shutdown waits for running steps. A
	// step still running after that is handed back: its sandbox destroyed
	// and the attempt reported failed (SandboxLost), so Temporal retries it
	// on another worker at once.
	DefaultStopTimeout = 30 * time.Second
	// handBackTimeout bounds the wait for handed-back attempts to report:
	// the tool's SIGTERM grace, then terminate and the log write (each
	// bounded by the cleanup timeout), with room to spare.
	handBackTimeout     = activities.DefaultGrace + 2*activities.DefaultCleanupTimeout + 10*time.Second
	DefaultReapInterval = time.Minute
	// DefaultDialTimeout: how long the worker keeps trying to reach
	// Temporal at start (make up starts server and worker together).
	DefaultDialTimeout = time.Minute

	heartbeatThrottle = 2 * time.Second

	// TracingServiceName is the worker's service.name unless
	// OTEL_SERVICE_NAME sets one.
	TracingServiceName = "agentflow-worker"
)

// Config configures Run.
type Config struct {
	Address   string // host:port of the Temporal frontend
	Namespace string
	// Security: TLS, mutual TLS, API key (internal/temporalconn).
	Security  temporalconn.Security
	TaskQueue string

	HealthAddr  string // "" → DefaultHealthAddr; "-" disables
	MetricsAddr string // "" → DefaultMetricsAddr; same as HealthAddr → one server; "-" disables

	WebhookURLs []string
	// WebhookSecret signs every webhook delivery (worker
	// --webhook-secret-file, webhook.LoadSecret); nil: unsigned.
	WebhookSecret      []byte
	MaxConcurrentSteps int
	// Store is the shared object store of checkpoints, logs and attempt
	// results (--store, e.g. s3://bucket/prefix; objstore.Open): every
	// worker given the same one can continue every other's steps. "" keeps
	// them in CheckpointDir, LogDir and ResultDir on this machine. A shared
	// store requires CheckpointKeyFile.
	Store         string
	CheckpointDir string
	// CheckpointKeyFile holds the keys that sign and verify checkpoint
	// manifests (checkpoint.LoadKeyring). "" → a key generated on first
	// start in CheckpointKeyDir(CheckpointDir): right for a worker whose
	// checkpoints no other worker reads.
	CheckpointKeyFile string
	// InsecureUnsignedCheckpoints also reads legacy schema-1 manifests.
	InsecureUnsignedCheckpoints bool
	LogDir                      string
	// ResultDir keeps attempt results without Store ("" → ResultDirFor(CheckpointDir)).
	ResultDir string
	// DevVaultDir is the development Vault for vault:// secrets (a
	// directory, secrets.DirVault; --dev-vault-dir). Vault, when set, is
	// HashiCorp Vault's KV v2 instead (--vault-addr); at most one of the
	// two; neither disables vault://. VaultKVMount is the KV mount of the
	// short vault:// form ("" → secrets.DefaultVaultMount).
	DevVaultDir  string
	Vault        *vaultkv.Config
	VaultKVMount string
	// SecretPolicy: the secret sources this worker may resolve (worker
	// --secret-env-allow, --secret-file-root, --secret-vault-prefix). The
	// zero value allows none; Run refuses to start on an invalid one.
	SecretPolicy secrets.Policy
	// Runtime: the OCI runtime of every sandbox ("runc", "runsc" for
	// gVisor, any runtime the daemon registers; "" = the daemon default).
	// The Docker backend refuses to start when it is not registered.
	Runtime string
	// GPUPolicy: what to do with steps that request GPUs when the sandbox
	// host has no GPU runtime ("" = require: fail them, non-retryably;
	// ignore: run them without a GPU).
	GPUPolicy activities.GPUPolicy
	// GPUs: how many GPU steps this worker runs at once from the GPU task
	// queue (workflows.GPUTaskQueue): GPUsAuto (0, the default) decides
	// from the host (gpuServe), GPUsNone never polls that queue, N > 0
	// serves devices 0..N-1. Each GPU step's sandbox is pinned to its own
	// devices of the worker's (internal/capacity).
	GPUs int
	// GPUDevices, when set, are the worker's GPU devices by ID (worker
	// --gpus device=ID,…): instead of GPUs, e.g. to split a host's GPUs
	// between workers.
	GPUDevices []string
	// CPUBudget (nano CPUs) and MemoryBudget (bytes) bound what the
	// sandboxes of running steps may use together, by their declared
	// resources (internal/capacity); BudgetAuto detects the host's; zero
	// is no bound (both zero: only MaxConcurrentSteps bounds steps).
	CPUBudget    int64
	MemoryBudget int64
	// GitRoots are the directories git workspaces may come from (--git-root);
	// none refuses every git import.
	GitRoots []string
	// PullRegistries, if not empty, are the only registries a missing
	// repo@sha256 step image is pulled from (--pull-registry).
	PullRegistries []string
	// Preflight: what a failed sandbox preflight does ("" = enforce: the
	// worker refuses to start; warn; off). Only the Docker backend has one.
	Preflight PreflightMode
	// Egress: the egress boundary of steps that declare egress.
	Egress EgressConfig
	// WarmPool is how many pre-started sandboxes the Docker host keeps per
	// pool key (worker --warm-pool; 0: no pool); WarmPoolIdle how long one
	// may wait to be taken (--warm-pool-idle; 0: the host's default). The
	// pool is drained when the worker stops.
	WarmPool     int
	WarmPoolIdle time.Duration
	// CodecKeyFile is the payload codec's key ring (payloadcodec.Load):
	// every payload and failure message this worker writes to Temporal is
	// encrypted, and what clients wrote with the same keys is read. ""
	// keeps payloads in clear.
	CodecKeyFile string

	// GCEvery: collect the state of runs past retention this often
	// (worker --gc-every; 0: never); GCOlderThan is the retention
	// (--gc-older-than; 0: DefaultGCOlderThan). See internal/gc.
	GCEvery     time.Duration
	GCOlderThan time.Duration

	StopTimeout  time.Duration
	ReapInterval time.Duration
	// Identity names this worker to Temporal and in step results ("" →
	// pid@hostname, the Temporal client default).
	Identity    string
	DialTimeout time.Duration

	Logger *slog.Logger

	// Tracing exports traces (the Temporal interceptor's and RunStep's
	// spans). nil: set up from the standard OTEL_* environment
	// (tracing.Setup; off without an endpoint) and shut down by Run; a
	// provider given here is the caller's to shut down.
	Tracing *tracing.Provider

	// Backend replaces the Docker backend (tests, other hosts).
	Backend *Backend
	// SandboxLabels are added to every sandbox this worker creates.
	SandboxLabels map[string]string
	// OnReady is called once the worker polls and the HTTP servers listen,
	// with their actual addresses (useful with ":0").
	OnReady func(Ready)
}

// Ready describes a started worker.
type Ready struct {
	HealthAddr  string
	MetricsAddr string
	Metrics     *metrics.Metrics
}

// Backend is the sandbox side of the worker.
type Backend struct {
	Host exechost.ExecutionHost
	// Ping reports whether the sandbox daemon answers (for /healthz).
	Ping func(context.Context) error
	// Reap removes orphaned sandboxes and reports how many.
	Reap func(context.Context) (int, error)
	// Close releases the backend (may be nil).
	Close func() error
	// Checkpoints is where the backend's host keeps checkpoints, when not
	// the worker's own store (an injected backend); adoption of a recorded
	// attempt checks its checkpoint there. nil = the worker's store.
	Checkpoints activities.CheckpointChecker
	// GPU reports that the host can attach GPUs to sandboxes. The Docker
	// backend sets it when the daemon has an nvidia runtime registered.
	GPU bool
	// Images checks step images for the dry-run preflight without pulling
	// (the Docker host); nil reports them as not checked.
	Images activities.ImageChecker
	// Hosts resolves egress hosts for the preflight as this worker's
	// egress proxies would; nil: from Config.Egress (overrides, then DNS).
	Hosts activities.HostLookup
}

func (c *Config) setDefaults() {
	if c.Address == "" {
		c.Address = envOr(temporalconn.EnvAddress, temporalconn.DefaultAddress)
	}
	if c.Namespace == "" {
		c.Namespace = envOr(temporalconn.EnvNamespace, temporalconn.DefaultNamespace)
	}
	if c.TaskQueue == "" {
		c.TaskQueue = workflows.TaskQueue
	}
	if c.HealthAddr == "" {
		c.HealthAddr = DefaultHealthAddr
	}
	if c.MetricsAddr == "" {
		c.MetricsAddr = DefaultMetricsAddr
	}
	if c.MaxConcurrentSteps <= 0 {
		c.MaxConcurrentSteps = DefaultMaxConcurrentSteps
	}
	if c.CheckpointDir == "" {
		c.CheckpointDir = DefaultCheckpointDir
	}
	if c.LogDir == "" {
		c.LogDir = DefaultLogDir
	}
	if c.ResultDir == "" {
		c.ResultDir = ResultDirFor(c.CheckpointDir)
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.ReapInterval <= 0 {
		c.ReapInterval = DefaultReapInterval
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.GCOlderThan <= 0 {
		c.GCOlderThan = DefaultGCOlderThan
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if c.Identity == "" {
		c.Identity = activities.DefaultIdentity()
	}
}

// Run runs the worker until ctx ends, then shuts down gracefully: the
// Temporal worker stops polling and waits up to StopTimeout for running
// steps; steps still running then are handed back (sandbox destroyed,
// attempt reported SandboxLost) and Run waits for those reports before the
// Temporal client closes; the HTTP servers drain, the reaper stops.
func Run(ctx context.Context, cfg Config) error {
	cfg.setDefaults()
	log := cfg.Logger
	gpuPolicy, err := activities.ParseGPUPolicy(string(cfg.GPUPolicy))
	if err != nil {
		return err
	}
	if cfg.Preflight, err = ParsePreflightMode(string(cfg.Preflight)); err != nil {
		return err
	}
	if err := cfg.SecretPolicy.Check(); err != nil {
		return fmt.Errorf("secret policy: %w", err)
	}
	log.Info("secret sources this worker resolves (nothing else)", "policy", cfg.SecretPolicy.Summary())
	log.Info("webhooks", "targets", len(cfg.WebhookURLs), "signed", cfg.WebhookSecret != nil)
	resolver, err := secretResolver(cfg, log)
	if err != nil {
		return err
	}
	m := metrics.New()

	tp := cfg.Tracing
	if tp == nil {
		if tp, err = tracing.Setup(ctx, tracing.Options{ServiceName: TracingServiceName, Logger: log}); err != nil {
			return fmt.Errorf("tracing: %w", err)
		}
		// Last: after the Temporal client closed, so every span of the
		// attempts that were running is queued before the final flush.
		defer func() {
			if err := tp.Shutdown(ctx); err != nil {
				log.Warn("tracing: final flush", "error", err)
			}
		}()
	}
	log.Info("tracing configured", "tracing", tp)

	// The stores first: a wrong --store or a missing shared key is a
	// configuration error worth failing on before anything connects.
	stores, err := openStores(ctx, cfg)
	if err != nil {
		return err
	}
	defer stores.Close()
	log.Info("state stores", "stores", stores.logValue())

	codec, err := loadCodec(cfg)
	if err != nil {
		return err
	}
	c, err := dial(ctx, cfg, m, tp, codec)
	if err != nil {
		return err
	}
	defer c.Close()

	// One keyring signs checkpoint manifests and attempt records.
	checkpoints, keys, err := openCheckpoints(cfg, stores.Checkpoints)
	if err != nil {
		return err
	}
	results, err := attemptrec.New(stores.Results, keys, 0)
	if err != nil {
		return fmt.Errorf("attempt records: %w", err)
	}

	backend := cfg.Backend
	if backend == nil {
		backend, err = newDockerBackend(ctx, cfg, checkpoints, m)
		if err != nil {
			return err
		}
	}
	// Adoption confirms a recorded checkpoint where the host keeps them: a
	// backend with a store of its own says so.
	var checkpointChecker activities.CheckpointChecker = checkpoints
	if backend.Checkpoints != nil {
		checkpointChecker = backend.Checkpoints
	}
	if backend.Close != nil {
		defer backend.Close()
	}

	hosts := backend.Hosts
	if hosts == nil {
		hosts = configEgressLookup(cfg.Egress)
	}

	// Step logs go to stores.Logs (a prefix of the shared store, or the
	// local log directory), streamed while tools run.
	logs := logstore.New(stores.Logs, logstore.Options{Logger: log})
	// GPU steps wait on their own queue for a worker with a free GPU: this
	// one polls it with one activity slot per GPU, and only while one of
	// its devices is free, so a GPU step waits in Temporal (pending) while
	// the devices are held; each step's sandbox gets its own devices.
	gs, err := gpuServe(cfg.GPUs, cfg.GPUDevices, backend.GPU, gpuPolicy, cfg.MaxConcurrentSteps, listNVIDIAGPUs)
	switch {
	case err != nil && gs.slots == 0:
		return err
	case err != nil:
		log.Warn("GPU runtime present but the GPUs could not be listed: running one GPU step at a time, devices not pinned", "error", err)
	}
	gpus := gs.slots
	pool, err := capacityPool(cfg, cfg.MaxConcurrentSteps+gpus, gs.devices)
	if err != nil {
		return err
	}
	var budget activities.Capacity // nil: no budget (a nil *Pool is not)
	if pool != nil {
		budget = pool
	}

	handBack := make(chan struct{})
	acts := activities.New(activities.Options{
		Capacity:    budget,
		Host:        backend.Host,
		Identity:    cfg.Identity,
		Results:     results,
		Checkpoints: checkpointChecker,
		HandBack:    handBack,
		Logs:        logs,
		Secrets:     resolver,
		Metrics:     m,
		Logger:      log,
		Tracer:      tp.Tracer(),
		Labels:      cfg.SandboxLabels,

		WebhookURLs:   cfg.WebhookURLs,
		WebhookSecret: cfg.WebhookSecret,

		GPUAvailable: backend.GPU,
		GPUPolicy:    gpuPolicy,

		Images: backend.Images,
		Hosts:  hosts,
	})
	if !backend.GPU {
		log.Info("sandbox host has no GPU runtime; steps that request GPUs follow the gpu policy", "gpu_policy", string(gpuPolicy))
	}

	// With a CPU/memory budget or GPU devices, both queues' slots come
	// from one pool, and each step charges its declared size (and takes
	// its devices) before its sandbox starts.
	if pool != nil {
		log.Info("capacity budget", "budget", pool.Budget().String(), "free_to_poll", pool.Share().String())
	}
	sdkOptions := func(slots int, gpu bool) (sdkworker.Options, error) {
		o := TemporalOptions(slots, cfg.StopTimeout)
		switch {
		case pool == nil:
			return o, nil
		case gpu:
			return withSlotSupplier(o, pool.GPUSupplier(slots))
		}
		return withSlotSupplier(o, pool.Supplier(slots))
	}

	wopts, err := sdkOptions(cfg.MaxConcurrentSteps, false)
	if err != nil {
		return err
	}
	w := sdkworker.New(c, cfg.TaskQueue, wopts)
	w.RegisterWorkflowWithOptions(workflows.AgentWorkflow, workflow.RegisterOptions{Name: workflows.WorkflowName})
	// run --dry-run's check on a worker of this queue (one Preflight activity).
	w.RegisterWorkflowWithOptions(workflows.PreflightWorkflow, workflow.RegisterOptions{Name: workflows.PreflightWorkflowName})
	w.RegisterActivity(acts)
	// The tool registry's workflow and its probe activity (tool register).
	registry.RegisterWithOptions(w, &registry.Prober{Host: backend.Host, Labels: cfg.SandboxLabels})
	workers := []sdkworker.Worker{w}
	if gpus > 0 {
		gq := workflows.GPUTaskQueue(cfg.TaskQueue)
		gopts, err := sdkOptions(gpus, true)
		if err != nil {
			return err
		}
		gw := sdkworker.New(c, gq, gopts)
		gw.RegisterActivity(acts)
		workers = append(workers, gw)
		log.Info("serving GPU steps", "task_queue", gq, "gpu_steps_at_once", gpus, "gpu_runtime", backend.GPU,
			"gpu_devices", strings.Join(gs.devices, ","), "pinned", len(gs.devices) > 0)
	}

	// Reap what a previous worker on this machine left behind before taking
	// work, then keep reaping in the background.
	var wg sync.WaitGroup
	reapCtx, stopReaper := context.WithCancel(ctx)
	defer func() {
		stopReaper()
		wg.Wait()
	}()
	reap(ctx, log, backend, m)
	every(reapCtx, &wg, cfg.ReapInterval, func() { reap(reapCtx, log, backend, m) })

	var dc converter.DataConverter // nil: the SDK's default
	if codec != nil {
		dc = codec.DataConverter()
	}
	startGC(reapCtx, &wg, cfg, c, dc, stores, log)

	servers, ready, err := serve(cfg, c, backend, m, log)
	if err != nil {
		return err
	}
	defer shutdown(servers, log)

	for i, sw := range workers {
		if err := sw.Start(); err != nil {
			for _, started := range workers[:i] {
				started.Stop()
			}
			return fmt.Errorf("start worker on task queue %s: %w", cfg.TaskQueue, err)
		}
	}
	log.Info("worker started", "address", cfg.Address, "namespace", cfg.Namespace, "task_queue", cfg.TaskQueue,
		"max_concurrent_steps", cfg.MaxConcurrentSteps, "health_addr", ready.HealthAddr, "metrics_addr", ready.MetricsAddr)
	if cfg.OnReady != nil {
		cfg.OnReady(ready)
	}

	<-ctx.Done()
	stop(workers, cfg.StopTimeout, handBack, log)
	return nil
}

// stop stops polling and waits up to stopTimeout for running steps. Steps
// still running then are handed back (handBack closed: each destroys its
// sandbox and reports SandboxLost), and stop waits, bounded, until they
// have reported: the Temporal worker's Stop returns only once every
// activity has finished and sent its result.
func stop(workers []sdkworker.Worker, stopTimeout time.Duration, handBack chan<- struct{}, log *slog.Logger) {
	log.Info("worker stopping", "stop_timeout", stopTimeout)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.Stop()
			}()
		}
		wg.Wait()
	}()
	wait := time.NewTimer(stopTimeout)
	defer wait.Stop()
	select {
	case <-stopped:
		log.Info("worker stopped")
		return
	case <-wait.C:
	}
	log.Warn("steps still running after the stop timeout: handing them back", "stop_timeout", stopTimeout)
	close(handBack)
	bound := time.NewTimer(handBackTimeout)
	defer bound.Stop()
	select {
	case <-stopped:
		log.Info("worker stopped; running steps were handed back")
	case <-bound.C:
		log.Error("handed-back steps did not report in time; Temporal retries them after their heartbeat timeout",
			"timeout", handBackTimeout)
	}
}

// loadCodec loads the payload codec's keys (nil without CodecKeyFile).
func loadCodec(cfg Config) (*payloadcodec.Codec, error) {
	if cfg.CodecKeyFile == "" {
		return nil, nil
	}
	codec, err := payloadcodec.Load(cfg.CodecKeyFile)
	if err != nil {
		return nil, err
	}
	cfg.Logger.Info("payloads to Temporal are encrypted", "encrypting_key_id", codec.ActiveKeyID())
	return codec, nil
}

// dial connects to Temporal, retrying until DialTimeout: the server may
// still be starting (make up, agentctl dev). With tracing on, the client
// carries the tracing interceptor, and so does the worker built on it; a
// non-nil codec encrypts every payload of the client and of the worker.
func dial(ctx context.Context, cfg Config, m *metrics.Metrics, tp *tracing.Provider, codec *payloadcodec.Codec) (client.Client, error) {
	interceptors, err := tp.ClientInterceptors()
	if err != nil {
		return nil, err
	}
	opts := client.Options{
		Interceptors:   interceptors,
		HostPort:       cfg.Address,
		Namespace:      cfg.Namespace,
		Identity:       cfg.Identity,
		Logger:         tlog.NewStructuredLogger(cfg.Logger.With("component", "temporal")),
		MetricsHandler: m.TemporalHandler(),
	}
	codec.Apply(&opts)
	if err := sdkconn.Apply(cfg.Security, &opts); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(cfg.DialTimeout)
	backoff := 250 * time.Millisecond
	for {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := client.DialContext(dctx, opts)
		cancel()
		if err == nil {
			return c, nil
		}
		// A certificate failure (wrong CA, refused client certificate)
		// does not heal by waiting: fail at once, saying so. A hang-up
		// may be a server still starting: retried like a refusal.
		if ctx.Err() != nil || time.Now().After(deadline) || temporalconn.IsCertificateFailure(err) {
			return nil, fmt.Errorf("connect to Temporal at %s (namespace %s): %w", cfg.Address, cfg.Namespace, cfg.Security.Explain(err))
		}
		cfg.Logger.Warn("Temporal not reachable yet, retrying", "address", cfg.Address, "error", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to Temporal at %s: %w", cfg.Address, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// every runs fn each interval, the first time one interval from now,
// until ctx ends; wg tracks the loop (the reaper, periodic gc).
func every(ctx context.Context, wg *sync.WaitGroup, interval time.Duration, fn func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn()
			}
		}
	}()
}

func reap(ctx context.Context, log *slog.Logger, b *Backend, m *metrics.Metrics) {
	if b.Reap == nil {
		return
	}
	n, err := b.Reap(ctx)
	m.Reaped(n)
	if err != nil && ctx.Err() == nil {
		log.Warn("reap orphaned sandboxes", "error", err, "reaped", n)
		return
	}
	if n > 0 {
		log.Info("reaped orphaned sandboxes", "reaped", n)
	}
}

func serve(cfg Config, c client.Client, b *Backend, m *metrics.Metrics, log *slog.Logger) ([]*http.Server, Ready, error) {
	ready := Ready{Metrics: m}
	health := HealthHandler(c, b.Ping)
	metricsH := MetricsHandler(m)

	type listener struct {
		addr string
		mux  *http.ServeMux
	}
	var ls []*listener
	add := func(addr, path string, h http.Handler) *listener {
		if addr == "-" {
			return nil
		}
		for _, l := range ls {
			if l.addr == addr {
				l.mux.Handle(path, h)
				return l
			}
		}
		l := &listener{addr: addr, mux: http.NewServeMux()}
		l.mux.Handle(path, h)
		ls = append(ls, l)
		return l
	}
	hl := add(cfg.HealthAddr, "/healthz", health)
	ml := add(cfg.MetricsAddr, "/metrics", metricsH)

	var servers []*http.Server
	for _, l := range ls {
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			shutdown(servers, log)
			return nil, ready, fmt.Errorf("listen on %s: %w", l.addr, err)
		}
		srv := &http.Server{Handler: l.mux, ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, srv)
		if l == hl {
			ready.HealthAddr = ln.Addr().String()
		}
		if l == ml {
			ready.MetricsAddr = ln.Addr().String()
		}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server", "addr", ln.Addr().String(), "error", err)
			}
		}()
	}
	return servers, ready, nil
}

func shutdown(servers []*http.Server, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(ctx); err != nil {
			log.Warn("http server shutdown", "error", err)
		}
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// TemporalOptions are the Temporal worker options of an agentflow worker
// with maxSteps activity slots, and of the load harness's bare floor
// (bench/cmd/loadworker), so the two poll alike. Pollers scale with the
// backlog (SDK autoscaling): with a fixed two, a burst of runs waited
// seconds per workflow task in the server's queue (docs/BENCHMARKS.md).
func TemporalOptions(maxSteps int, stopTimeout time.Duration) sdkworker.Options {
	// Up to 16 pollers per kind: more bought nothing measurable on the
	// load harness and cost memory (one long poll each).
	const maxPollers = 16
	return sdkworker.Options{
		WorkflowTaskPollerBehavior:         sdkworker.NewPollerBehaviorAutoscaling(sdkworker.PollerBehaviorAutoscalingOptions{MaximumNumberOfPollers: maxPollers}),
		ActivityTaskPollerBehavior:         sdkworker.NewPollerBehaviorAutoscaling(sdkworker.PollerBehaviorAutoscalingOptions{MaximumNumberOfPollers: maxPollers}),
		MaxConcurrentActivityExecutionSize: maxSteps,
		// Longer than our own wait: the SDK cancels running activities
		// when it expires, which would abort them as "canceled" instead of
		// handing them back (stop).
		WorkerStopTimeout: stopTimeout + handBackTimeout,
		// The SDK sends at most one heartbeat per throttle interval (by
		// default 80% of the HeartbeatTimeout, 16 s for steps), and a
		// cancellation is only delivered in a heartbeat's answer. Capping
		// the throttle makes `agentctl cancel` take seconds, not ~16 s.
		MaxHeartbeatThrottleInterval:     heartbeatThrottle,
		DefaultHeartbeatThrottleInterval: heartbeatThrottle,
	}
}
