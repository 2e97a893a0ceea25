package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/failure"
)

// Register adds the registry workflow and its ProbeTool activity to a
// worker. host provisions the probe sandboxes.
func Register(w worker.Registry, host exechost.ExecutionHost) {
	RegisterWithOptions(w, &Prober{Host: host})
}

// RegisterWithOptions is Register with a configured Prober (tests add
// labels to the probe sandboxes).
func RegisterWithOptions(w worker.Registry, p *Prober) {
	w.RegisterWorkflowWithOptions(RegistryWorkflow, workflow.RegisterOptions{Name: WorkflowName})
	w.RegisterActivity(p)
}

// Prober runs a tool image's --version and --help in a sandbox.
type Prober struct {
	Host exechost.ExecutionHost
	// Labels are added to every probe sandbox.
	Labels map[string]string
}

// probeLimits are deliberately small: --version and --help must not need
// more, and a misbehaving image cannot hurt the worker.
var probeLimits = exechost.ResourceLimits{
	NanoCPUs:       500_000_000,
	MemoryBytes:    128 << 20,
	DiskBytes:      16 << 20,
	Pids:           64,
	Runtime:        90 * time.Second,
	MaxOutputBytes: 1 << 20,
}

const probeExecTimeout = 30 * time.Second

// ProbeTool provisions a sandbox from req.Image (network none, minimal
// limits), checks that `/bin/tool --version` prints req.Version and keeps
// `/bin/tool --help` as the usage. The sandbox is always terminated.
func (p *Prober) ProbeTool(ctx context.Context, req ProbeRequest) (*ProbeResult, error) {
	if p.Host == nil {
		return nil, errors.New("probe: no execution host configured on this worker")
	}
	if err := ValidateImageRef(req.Image); err != nil {
		return nil, failure.New(ErrTypePolicy, err.Error())
	}
	id := probeExecutionID(ctx, req)
	labels := map[string]string{}
	for k, v := range p.Labels {
		labels[k] = v
	}
	ex, err := p.Host.Provision(ctx, exechost.ProvisionRequest{
		ExecutionID: id,
		Image:       req.Image,
		Resources:   probeLimits,
		Network:     exechost.NetworkNone,
		Labels:      labels,
	})
	if err != nil {
		if failure.HostType(err, false) == ErrTypePolicy {
			return nil, failure.New(ErrTypePolicy, fmt.Sprintf("provision probe sandbox for %s: %v", req.Image, err))
		}
		return nil, fmt.Errorf("provision probe sandbox for %s: %w", req.Image, err)
	}
	defer func() {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := p.Host.Terminate(tctx, id); err != nil {
			activity.GetLogger(ctx).Warn("terminate probe sandbox", "execution_id", string(id), "error", err)
		}
	}()

	ver, err := p.run(ctx, id, "--version")
	if err != nil {
		return nil, err
	}
	got := strings.TrimSpace(ver)
	if got != req.Version {
		return nil, failure.New(ErrTypeVersionMismatch,
			fmt.Sprintf("image %s: /bin/tool --version printed %q, want %q", req.Image, truncate(got, 200), req.Version))
	}
	usage, err := p.run(ctx, id, "--help")
	if err != nil {
		return nil, err
	}
	return &ProbeResult{Version: got, Usage: truncate(usage, MaxUsageBytes), ImageDigest: ex.ImageDigest}, nil
}

// run execs /bin/tool with one flag; a non-zero exit is a probe failure
// (non-retryable: the image is what it is), infrastructure errors retry.
func (p *Prober) run(ctx context.Context, id exechost.ExecutionID, flag string) (string, error) {
	res, err := p.Host.Exec(ctx, id, exechost.ExecRequest{Command: []string{"/bin/tool", flag}, Timeout: probeExecTimeout})
	switch {
	case errors.Is(err, exechost.ErrTimeout), errors.Is(err, exechost.ErrOutputLimit):
		// A probe that hangs or floods is the image's fault, not the
		// sandbox's: not retried.
		return "", failure.New(ErrTypeProbeFailed, fmt.Sprintf("/bin/tool %s: %v", flag, err))
	case err != nil:
		return "", fmt.Errorf("/bin/tool %s: %w", flag, err)
	case res.ExitCode != 0:
		return "", failure.New(ErrTypeProbeFailed,
			fmt.Sprintf("/bin/tool %s exited %d: %s", flag, res.ExitCode, truncate(strings.TrimSpace(string(res.Stderr)), 500)))
	}
	out := string(res.Stdout)
	if strings.TrimSpace(out) == "" && flag == "--help" {
		// Some CLIs print usage on stderr.
		out = string(res.Stderr)
	}
	return out, nil
}

// probeExecutionID is deterministic per activity attempt, so a re-delivered
// attempt adopts or replaces its sandbox instead of duplicating it.
func probeExecutionID(ctx context.Context, req ProbeRequest) exechost.ExecutionID {
	seed := req.Name + ":" + req.Version + "|" + req.Image
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		seed = fmt.Sprintf("%s|%s|%s|%d", info.WorkflowExecution.RunID, info.ActivityID, seed, info.Attempt)
	}
	sum := sha256.Sum256([]byte(seed))
	return exechost.ExecutionID("af-probe-" + hex.EncodeToString(sum[:8]))
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "\n…(truncated)"
}
