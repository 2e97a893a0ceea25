package activities

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/attemptrec"
	"github.com/agentflow/agentflow/internal/capacity"
	"github.com/agentflow/agentflow/internal/logstore"
	"github.com/agentflow/agentflow/internal/metrics"
	"github.com/agentflow/agentflow/internal/secrets"
)

// Defaults for Options fields left zero.
const (
	// DefaultInlineOutputLimit bounds a tool's stdout JSON, which travels
	// through Temporal history as the activity result and into downstream
	// steps' inputs. Temporal refuses payloads over 2 MB and warns well
	// before; 256 KiB keeps a run with many steps far from those limits.
	// Larger data belongs in /workspace (checkpointed and handed to
	// dependent steps), with its path in the output.
	DefaultInlineOutputLimit = 256 << 10
	// DefaultGrace is how long a canceled tool has between SIGTERM and the
	// sandbox's destruction. The ExecutionHost enforces it; it is here so
	// the cleanup budget accounts for it.
	DefaultGrace = 5 * time.Second
	// DefaultHeartbeatInterval is well under the 20 s HeartbeatTimeout
	// (budget.go) so a dead worker is noticed within one timeout, and
	// short because cancellation reaches an activity only as the answer to a
	// heartbeat: with the worker's heartbeat throttle at the same 2 s, a
	// canceled step hears about it within about 2 s (then SIGTERM, grace).
	DefaultHeartbeatInterval = 2 * time.Second
	// DefaultCleanupTimeout bounds checkpoint-after-failure and Terminate,
	// which run on a context detached from the activity's cancellation.
	DefaultCleanupTimeout = 30 * time.Second
	// DefaultStderrTail is how much of stderr a failure message carries.
	DefaultStderrTail = 2 << 10
	// DefaultWebhookTimeout bounds one webhook POST.
	DefaultWebhookTimeout = 10 * time.Second
)

// ToolCommand is what every tool image runs (SPEC §8).
var ToolCommand = []string{"/bin/tool"}

// Capacity is the worker's budget and GPU devices as a step attempt sees
// them.
type Capacity interface {
	// Charge waits until size fits and returns the lease (with the step's
	// GPU devices, if the worker has any) that gives it back; a
	// *capacity.TooLargeError when it never can.
	Charge(ctx context.Context, size capacity.Size) (capacity.Lease, error)
}

// Options configure Activities. Host is required; everything else has a
// working default (no logs, no secrets, no metrics).
type Options struct {
	// Capacity, when set, is the worker's CPU and memory budget and its
	// GPU devices: a step charges its declared size before its sandbox
	// starts and waits, heartbeating, until that fits; a GPU step's
	// sandbox gets the devices its lease names (internal/capacity).
	Capacity Capacity
	Host     exechost.ExecutionHost
	// Logs keeps every attempt's log (stderr streamed while the tool runs).
	Logs    *logstore.Store
	Secrets secrets.Resolver
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Tracer opens each step attempt's span and its sandbox phases'
	// (trace.go); nil: no-op.
	Tracer trace.Tracer

	// Results keeps the signed record of every successful attempt, written
	// before the attempt reports (results.go); nil records nothing, and a
	// lost completion then runs the tool again.
	Results *attemptrec.Store
	// Checkpoints confirms a recorded attempt's checkpoint before its result
	// is adopted; adoption needs both Results and Checkpoints.
	Checkpoints CheckpointChecker

	// HandBack, closed by a stopping worker once it stops waiting for
	// running attempts, makes each of them abort, terminate its sandbox and
	// fail as SandboxLost (handback.go). nil: attempts run to the end.
	HandBack <-chan struct{}

	// Identity names this worker in results, failure details and attempt
	// records (the worker passes its Temporal client identity); ""
	// is DefaultIdentity().
	Identity string

	InlineOutputLimit int64
	Grace             time.Duration
	HeartbeatInterval time.Duration
	CleanupTimeout    time.Duration
	StderrTail        int
	// Labels are added to every sandbox (e.g. agentflow.test=1 in tests).
	Labels map[string]string

	// GPUAvailable reports that Host can attach GPUs to sandboxes (the
	// worker detects a GPU runtime on the Docker daemon at start).
	GPUAvailable bool
	// GPUPolicy applies to steps that request GPUs when !GPUAvailable;
	// "" is GPUPolicyRequire.
	GPUPolicy GPUPolicy

	// Images checks step images for the dry-run preflight (nil: the
	// preflight reports images as not checked).
	Images ImageChecker
	// Hosts resolves egress hosts for the preflight as the worker's egress
	// proxy would (nil: not checked).
	Hosts HostLookup

	// WebhookURLs receive every run-finished event, in addition to the
	// spec's own notify URLs.
	WebhookURLs []string
	// WebhookSecret signs every delivery (webhook.Sign: a timestamp and an
	// HMAC-SHA256 header); nil sends them unsigned.
	WebhookSecret []byte
	HTTPClient    *http.Client
}

// Activities holds the dependencies of every agentflow activity. Activities
// are registered on the worker by method value (no name prefixes); every
// exported method is an activity, so helpers stay unexported.
type Activities struct {
	opts   Options
	log    *slog.Logger
	tracer trace.Tracer
	now    func() time.Time // webhook signing time; tests move it
}

// New fills defaults.
func New(opts Options) *Activities {
	if opts.InlineOutputLimit <= 0 {
		opts.InlineOutputLimit = DefaultInlineOutputLimit
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if opts.CleanupTimeout <= 0 {
		opts.CleanupTimeout = DefaultCleanupTimeout
	}
	if opts.StderrTail <= 0 {
		opts.StderrTail = DefaultStderrTail
	}
	if opts.GPUPolicy == "" {
		opts.GPUPolicy = GPUPolicyRequire
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: DefaultWebhookTimeout}
	}
	if opts.Identity == "" {
		opts.Identity = DefaultIdentity()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tracer := opts.Tracer
	if tracer == nil {
		tracer = noop.NewTracerProvider().Tracer("")
	}
	return &Activities{opts: opts, log: log, tracer: tracer, now: time.Now}
}

// DefaultIdentity is pid@hostname, the Temporal client's default identity.
func DefaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("%d@%s", os.Getpid(), host)
}
