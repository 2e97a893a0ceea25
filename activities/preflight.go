package activities

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/spec"
)

// The dry-run preflight (agentctl run --dry-run): one activity on the
// run's task queue checks, on the worker that takes it and without running
// any tool, what the run's steps will need there. Every check is one line
// of the report; the report carries no secret value.

// ImageChecker says whether an image can be had on this worker's sandbox
// host without pulling it: present, or pullable (for Docker: a missing
// repo@sha256 its registry holds, from a registry the worker pulls from).
// note says how (for the report); err says why not and names the image.
// Implementations must not pull or run anything and must honour ctx.
type ImageChecker interface {
	CheckImage(ctx context.Context, ref string) (note string, err error)
}

// HostLookup resolves an egress host the way this worker's egress proxy
// would (the worker's overrides, then DNS). An error says why a step
// declaring the host cannot reach it from this worker (including "this
// worker serves no egress"). Implementations must honour ctx.
type HostLookup interface {
	LookupHost(ctx context.Context, host string) ([]netip.Addr, error)
}

// Check kinds and states of a PreflightCheck.
const (
	CheckImage  = "image"
	CheckSecret = "secret"
	CheckGPU    = "gpu"
	CheckEgress = "egress"

	CheckOK   = "ok"
	CheckFail = "FAIL"
	// CheckSkip: this worker cannot check it (e.g. a host without an
	// ImageChecker); not a failure.
	CheckSkip = "skip"
)

// PreflightTimeout bounds one check (an image's registry, a DNS lookup, a
// vault read); checkBudget shortens it to fit the activity's deadline.
const PreflightTimeout = 10 * time.Second

// preflightParallel bounds the checks in flight at once.
const preflightParallel = 8

// PreflightRequest is the Preflight activity's input: per tool step, what
// the checks need. No secret value: sources only.
type PreflightRequest struct {
	Steps []PreflightStep `json:"steps"`
}

// PreflightStep is one tool step as the preflight sees it.
type PreflightStep struct {
	ID    string `json:"id"`
	Image string `json:"image"`
	// SecretSources: each secret the step references → its source.
	SecretSources map[string]string `json:"secret_sources,omitempty"`
	GPUs          int               `json:"gpus,omitempty"`
	// Egress: host:port only (headers are not needed to check a name).
	Egress []spec.EgressRule `json:"egress,omitempty"`
}

// PreflightRequestFor is the request for plan: every tool step (approval
// steps run nothing), in plan order.
func PreflightRequestFor(plan *spec.Plan) PreflightRequest {
	var req PreflightRequest
	for _, ps := range plan.Steps {
		if ps.Approval != nil {
			continue
		}
		st := PreflightStep{ID: ps.ID, Image: ps.Image, GPUs: ps.Resources.GPUs}
		for _, name := range ps.Secrets {
			for _, d := range plan.Secrets {
				if d.Name == name {
					if st.SecretSources == nil {
						st.SecretSources = map[string]string{}
					}
					st.SecretSources[name] = d.Source
				}
			}
		}
		for _, r := range ps.Egress {
			st.Egress = append(st.Egress, spec.EgressRule{Host: r.Host, Port: r.Port})
		}
		req.Steps = append(req.Steps, st)
	}
	return req
}

// PreflightCheck is one line of the report.
type PreflightCheck struct {
	Kind   string `json:"kind"` // image, secret, gpu, egress
	Step   string `json:"step"`
	Target string `json:"target"` // the image, "name (scheme)", "N GPUs", "host:port"
	Status string `json:"status"` // ok, FAIL, skip
	Reason string `json:"reason,omitempty"`
}

// PreflightReport is the Preflight activity's result.
type PreflightReport struct {
	// Worker is the identity of the worker that checked.
	Worker string           `json:"worker"`
	Checks []PreflightCheck `json:"checks"`
}

// Failed counts the failed checks.
func (r *PreflightReport) Failed() int {
	n := 0
	for _, c := range r.Checks {
		if c.Status == CheckFail {
			n++
		}
	}
	return n
}

// Preflight checks req on this worker: images, secrets, GPUs, egress
// hosts, in step order, each kind in a fixed order within a step. It never
// fails for a failed check (that is a line of the report); it returns an
// error only when the activity itself was canceled.
func (a *Activities) Preflight(ctx context.Context, req PreflightRequest) (*PreflightReport, error) {
	var checks []*PreflightCheck
	var jobs []func(context.Context)
	add := func(c *PreflightCheck, run func(context.Context, *PreflightCheck)) {
		checks = append(checks, c)
		if run != nil {
			jobs = append(jobs, func(ctx context.Context) { run(ctx, c) })
		}
	}
	// A secret used by several steps is resolved once.
	secretsOnce := newSecretChecks(a.opts.Secrets)
	for _, st := range req.Steps {
		add(&PreflightCheck{Kind: CheckImage, Step: st.ID, Target: st.Image}, a.checkImage)
		for _, name := range slices.Sorted(maps.Keys(st.SecretSources)) {
			src := st.SecretSources[name]
			c := &PreflightCheck{Kind: CheckSecret, Step: st.ID, Target: fmt.Sprintf("%s (%s)", name, scheme(src))}
			add(c, func(ctx context.Context, c *PreflightCheck) { secretsOnce.check(ctx, src, c) })
		}
		for _, r := range st.Egress {
			add(&PreflightCheck{Kind: CheckEgress, Step: st.ID, Target: fmt.Sprintf("%s:%d", r.Host, r.Port)}, a.checkEgressHost(r.Host))
		}
	}

	budget := checkBudget(ctx, time.Now())
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(preflightParallel)
	for _, job := range jobs {
		g.Go(func() error {
			cctx, cancel := context.WithTimeout(gctx, budget)
			defer cancel()
			job(cctx)
			return nil
		})
	}
	_ = g.Wait() // jobs return nil: a failed check is a line, not an error
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// Secret values resolved here never leave the worker; a reason that
	// quoted one anyway (a misbehaving resolver) is scrubbed.
	scrub := newScrubber(secretsOnce.values())
	rep := &PreflightReport{Worker: a.opts.Identity, Checks: make([]PreflightCheck, len(checks))}
	for i, c := range checks {
		c.Reason = scrub.String(c.Reason)
		rep.Checks[i] = *c
	}
	a.log.InfoContext(ctx, "preflight", "checks", len(rep.Checks), "failed", rep.Failed())
	return rep, nil
}

// checkBudget is how long one check may take: PreflightTimeout, or less
// when the activity's deadline is nearer, so that a slow check ends as a
// failed line while there is still time to report (a fifth of what is
// left, at least a second, is kept for that).
func checkBudget(ctx context.Context, now time.Time) time.Duration {
	deadline, ok := ctx.Deadline()
	if !ok {
		return PreflightTimeout
	}
	left := deadline.Sub(now)
	return max(min(PreflightTimeout, left-max(left/5, time.Second)), 100*time.Millisecond)
}

func (a *Activities) checkImage(ctx context.Context, c *PreflightCheck) {
	switch {
	case c.Target == "":
		c.Status, c.Reason = CheckFail, "the step has no image (unresolved tool)"
	case a.opts.Images == nil:
		c.Status, c.Reason = CheckSkip, "this worker's sandbox host cannot check images"
	default:
		note, err := a.opts.Images.CheckImage(ctx, c.Target)
		if err != nil {
			c.Status, c.Reason = CheckFail, err.Error()
			return
		}
		c.Status, c.Reason = CheckOK, note
	}
}

func (a *Activities) checkEgressHost(host string) func(context.Context, *PreflightCheck) {
	return func(ctx context.Context, c *PreflightCheck) {
		switch {
		case strings.HasPrefix(host, "*."):
			// A wildcard names no host to resolve: the names under it are
			// resolved when the tool connects.
			c.Status, c.Reason = CheckOK, "wildcard: names under it resolve when the tool connects"
		case a.opts.Hosts == nil:
			c.Status, c.Reason = CheckSkip, "this worker cannot check egress hosts"
		default:
			addrs, err := a.opts.Hosts.LookupHost(ctx, host)
			if err != nil {
				c.Status, c.Reason = CheckFail, err.Error()
				return
			}
			c.Status, c.Reason = CheckOK, "resolves to "+joinAddrs(addrs)
		}
	}
}

// secretChecks resolves each source once, keeps the values only to scrub
// the report, and records each source's outcome.
type secretChecks struct {
	r    secrets.Resolver
	mu   sync.Mutex
	done map[string]*secretOutcome
}

type secretOutcome struct {
	ready chan struct{}
	value string
	err   error
}

func newSecretChecks(r secrets.Resolver) *secretChecks {
	return &secretChecks{r: r, done: map[string]*secretOutcome{}}
}

func (s *secretChecks) check(ctx context.Context, source string, c *PreflightCheck) {
	s.mu.Lock()
	o, ok := s.done[source]
	if !ok {
		o = &secretOutcome{ready: make(chan struct{})}
		s.done[source] = o
	}
	s.mu.Unlock()
	if !ok {
		o.value, o.err = s.resolve(ctx, source)
		close(o.ready)
	}
	select {
	case <-o.ready:
	case <-ctx.Done():
		c.Status, c.Reason = CheckFail, "not resolved in time: "+ctx.Err().Error()
		return
	}
	if o.err != nil {
		c.Status, c.Reason = CheckFail, o.err.Error()
		return
	}
	c.Status, c.Reason = CheckOK, "resolves on this worker"
}

func (s *secretChecks) resolve(ctx context.Context, source string) (string, error) {
	if s.r == nil {
		return "", errors.New("this worker has no secret resolver")
	}
	v, err := s.r.Resolve(ctx, source)
	if err != nil {
		if errors.Is(err, secrets.ErrNotAllowed) {
			return "", fmt.Errorf("refused by this worker's secret policy: %w", err)
		}
		return "", err
	}
	return v, nil
}

// values are the values resolved so far (for the scrubber only).
func (s *secretChecks) values() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, o := range s.done {
		select {
		case <-o.ready:
			if o.err == nil && o.value != "" {
				out = append(out, o.value)
			}
		default:
		}
	}
	return out
}

func scheme(source string) string {
	if s, _, ok := strings.Cut(source, "://"); ok {
		return s
	}
	return "?"
}

func joinAddrs(addrs []netip.Addr) string {
	const show = 3
	s := make([]string, 0, min(len(addrs), show))
	for i, a := range addrs {
		if i == show {
			break
		}
		s = append(s, a.String())
	}
	out := strings.Join(s, ", ")
	if len(addrs) > show {
		out += fmt.Sprintf(" (+%d more)", len(addrs)-show)
	}
	return out
}
