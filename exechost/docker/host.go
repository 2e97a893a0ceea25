// Package docker is the reference ExecutionHost: one hardened, network-less
// container per execution. Responsibilities are split as the boundary's
// design asks: policy/ validates and builds configuration, runner/ runs
// processes (deadline, abort, output cap), workspace/ moves /workspace in and
// out as tar streams; this package holds only lifecycle and ownership state.
package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/exechost/docker/policy"
	"github.com/agentflow/agentflow/exechost/docker/runner"
	"github.com/agentflow/agentflow/exechost/docker/workspace"
	"github.com/agentflow/agentflow/exechost/gitsource"
)

// Client is the part of *client.Client the host uses.
type Client interface {
	runner.Client
	ReaperClient
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, containerID string, options container.StartOptions) error
	ContainerInspect(ctx context.Context, containerID string) (container.InspectResponse, error)
	ContainerWait(ctx context.Context, containerID string, condition container.WaitCondition) (<-chan container.WaitResponse, <-chan error)
	ContainerRename(ctx context.Context, containerID, newContainerName string) error
	imageClient
	egressClient
}

var _ Client = (*client.Client)(nil)

// Options configure a Host.
type Options struct {
	Client Client
	Store  checkpoint.Store
	// Owner labels every sandbox this host creates (default DefaultOwner()).
	Owner string
	// Policy: user, image pinning, ceilings, tmpfs sizes.
	Policy policy.Config
	// KillGrace is the time between SIGTERM and removal (default 5 s).
	KillGrace time.Duration
	// MaxWorkspaceEntries bounds files per workspace stream (default 1e6).
	MaxWorkspaceEntries int
	// Git is the git import configuration: the repository roots (worker
	// --git-root; none refuses every git workspace) and git's budget.
	Git    gitsource.Config
	Logger *slog.Logger
	// Runtime is the OCI runtime every sandbox runs under (HostConfig.Runtime:
	// "runc", "runsc" for gVisor, any name the daemon registers); "" is the
	// daemon's default. New does not check it: call CheckRuntime at start.
	Runtime string
	// Worker names this worker in errors about images it lacks (default:
	// the host name).
	Worker string
	// PullTimeout bounds one image pull (default DefaultPullTimeout).
	PullTimeout time.Duration
	// DockerConfigDir holds the config.json whose registry credentials
	// pulls use (default DefaultDockerConfigDir: $DOCKER_CONFIG, else
	// ~/.docker). A missing file means anonymous pulls.
	DockerConfigDir string
	// PullRegistries, if not empty, are the only registries (host[:port] as
	// image references name them; docker.io for Docker Hub) a missing
	// image is pulled from: the operator's bound on which hosts a spec
	// author can make the worker's daemon contact. Empty: any registry
	// the daemon can reach.
	PullRegistries []string
	// Egress configures the egress boundary of NetworkEgress sandboxes
	// (egress.go); its zero value refuses every NetworkEgress request.
	Egress EgressOptions
	// Pool is the warm pool of pre-started sandboxes (pool.go); its zero
	// value is off. A host with a pool must be drained (Drain).
	Pool PoolOptions
}

// EgressOptions configure the egress boundary: per sandbox, an internal
// network and a proxy container on it that also sits on Network.
type EgressOptions struct {
	// ProxyImage is the egress proxy's local image ID ("sha256:…"),
	// resolved once at worker start (worker --egress-proxy-image); empty
	// refuses NetworkEgress provisions with a clear error.
	ProxyImage string
	// Network is the Docker network the proxies reach upstreams on
	// (worker --egress-network, default "bridge").
	Network string
	// AllowCIDRs are private ranges upstreams may be in (worker
	// --egress-allow-cidr); loopback, link-local and multicast are
	// refused always.
	AllowCIDRs []netip.Prefix
	// ExtraRootsPEM are CAs the proxy trusts for upstreams and the
	// sandbox trusts in addition to the per-sandbox CA (worker
	// --egress-ca-file).
	ExtraRootsPEM []byte
	// Resolve overrides DNS in the proxy (test-only, worker
	// --egress-resolve name=ip).
	Resolve map[string]string
	// MaxConnections per sandbox (0: exechost.DefaultEgressConns).
	MaxConnections int
	// Unavailable, when set, says why this host serves no egress (the
	// worker: --egress=false, a missing proxy image, or a runtime without
	// networking, EgressUnavailable); NetworkEgress provisions are refused
	// with it.
	Unavailable string
}

// Host implements exechost.ExecutionHost on a Docker daemon.
type Host struct {
	c       Client
	store   checkpoint.Store
	policy  *policy.Policy
	run     *runner.Runner
	owner   string
	entries int
	git     *gitsource.Importer
	log     *slog.Logger
	runtime string
	images  *images
	egress  EgressOptions
	roots   egressRoots

	pool *pool // nil: no warm pool

	denyOnce  sync.Once
	denyAddrs []string // this machine's addresses (egressDenyAddrs)

	mu    sync.Mutex
	execs map[exechost.ExecutionID]*execution
	// gone remembers recently ended executions so later calls report
	// ErrTerminated rather than ErrNotFound.
	gone map[exechost.ExecutionID]time.Time
}

const maxTombstones = 10000

var _ exechost.ExecutionHost = (*Host)(nil)

// execution is the host's state for one sandbox. mu serialises Exec and
// Checkpoint (and the provisioning itself); terminated is read without it so
// Terminate never waits for a running command.
type execution struct {
	mu          sync.Mutex
	ready       bool
	id          exechost.ExecutionID
	containerID string // written under both mu and Host.mu
	imageID     string
	image       string // as requested
	resources   exechost.ResourceLimits
	deadline    time.Time
	timer       *time.Timer
	oomKills    int64
	terminated  atomic.Bool
	// inherited are the entries the workspace was provisioned with, exempt
	// from a checkpoint's name refusal (workspace.Redaction).
	inherited map[string]string
	// egress is the boundary of a NetworkEgress sandbox (written under
	// both mu and Host.mu, like containerID); proxyEnv the variables
	// every exec of it gets (policy.ProxyEnv).
	egress   *boundary
	proxyEnv []string
	// poolSlot is the pool slot (execution label) of a sandbox taken from
	// the warm pool (written under both mu and Host.mu); env its provision
	// env, which such a sandbox gets at every exec instead of in its
	// configuration.
	poolSlot string
	env      []string
	// launch is a pooled sandbox's prepared launcher (pool.go): the first
	// Exec runs through it; Terminate and a lost sandbox close it unused.
	launch atomic.Pointer[runner.Prepared]
}

// New returns a Host. It does not contact the daemon.
func New(opts Options) (*Host, error) {
	if opts.Client == nil || opts.Store == nil {
		return nil, errors.New("docker host: Client and Store are required")
	}
	p, err := policy.New(opts.Policy)
	if err != nil {
		return nil, err
	}
	// PID 1 (the deadline keeper) runs as policy.KeeperUser; a tool with the
	// same uid could stop it.
	if err := policy.CheckKeeper(p.User()); err != nil {
		return nil, err
	}
	if opts.Owner == "" {
		opts.Owner = DefaultOwner()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxWorkspaceEntries <= 0 {
		opts.MaxWorkspaceEntries = 1_000_000
	}
	if opts.Git.MaxEntries <= 0 || opts.Git.MaxEntries > opts.MaxWorkspaceEntries {
		opts.Git.MaxEntries = min(gitsource.DefaultMaxEntries, opts.MaxWorkspaceEntries)
	}
	if opts.Worker == "" {
		opts.Worker, _ = os.Hostname()
	}
	if opts.PullTimeout <= 0 {
		opts.PullTimeout = DefaultPullTimeout
	}
	if opts.DockerConfigDir == "" {
		opts.DockerConfigDir = DefaultDockerConfigDir()
	}
	if err := CheckPullRegistries(opts.PullRegistries); err != nil {
		return nil, fmt.Errorf("docker host: %w", err)
	}
	git, err := gitsource.New(opts.Git)
	if err != nil {
		return nil, fmt.Errorf("docker host: %w", err)
	}
	if opts.Egress.Network == "" {
		opts.Egress.Network = DefaultEgressNetwork
	}
	roots, err := loadEgressRoots(opts.Egress.ExtraRootsPEM)
	if err != nil {
		return nil, fmt.Errorf("docker host: %w", err)
	}
	h := &Host{
		c:       opts.Client,
		store:   opts.Store,
		policy:  p,
		run:     runner.New(opts.Client, runner.Options{Grace: opts.KillGrace, Logger: opts.Logger}),
		owner:   opts.Owner,
		entries: opts.MaxWorkspaceEntries,
		git:     git,
		log:     opts.Logger,
		runtime: opts.Runtime,
		images: &images{
			c: opts.Client, worker: opts.Worker, timeout: opts.PullTimeout, log: opts.Logger,
			creds:      registryCredentials{dir: opts.DockerConfigDir},
			registries: slices.Clone(opts.PullRegistries),
			pulls:      make(map[string]*pull),
		},
		egress: opts.Egress,
		roots:  roots,
		execs:  make(map[exechost.ExecutionID]*execution),
		gone:   make(map[exechost.ExecutionID]time.Time),
	}
	if opts.Pool.Size > 0 {
		h.pool = newPool(h, opts.Pool)
	}
	return h, nil
}

// Owner is the owner label of this host's sandboxes.
func (h *Host) Owner() string { return h.owner }

// Provision implements exechost.ExecutionHost. A second Provision of a live
// execution with the same image returns it unchanged; a leftover container
// with the same ID that this host does not track is replaced.
func (h *Host) Provision(ctx context.Context, req exechost.ProvisionRequest) (*exechost.Execution, error) {
	if err := h.policy.ValidateProvision(req); err != nil {
		return nil, fmt.Errorf("provision %s: %w", req.ExecutionID, err)
	}
	if req.Network == exechost.NetworkEgress {
		switch {
		case h.egress.Unavailable != "":
			return nil, fmt.Errorf("provision %s: %w", req.ExecutionID, &exechost.PolicyError{Field: "network", Reason: h.egress.Unavailable})
		case h.egress.ProxyImage == "":
			return nil, fmt.Errorf("provision %s: %w", req.ExecutionID, errNoEgress)
		}
	}
	for {
		h.mu.Lock()
		e, ok := h.execs[req.ExecutionID]
		if !ok {
			e = &execution{id: req.ExecutionID}
			h.execs[req.ExecutionID] = e
			delete(h.gone, req.ExecutionID) // an ID may be provisioned again after it ended
		}
		h.mu.Unlock()

		e.mu.Lock()
		if !h.current(e) {
			e.mu.Unlock() // ended or failed while we waited: look again
			continue
		}
		if e.ready {
			defer e.mu.Unlock()
			if e.image != req.Image {
				return nil, fmt.Errorf("provision %s: already running with image %s: %w",
					req.ExecutionID, e.image, &exechost.PolicyError{Field: "execution_id", Reason: "in use with another image"})
			}
			return e.describe(), nil
		}
		x, err := h.provision(ctx, e, req)
		if err != nil {
			h.forget(e, false) // provision removed what it made
		}
		e.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("provision %s: %w", req.ExecutionID, err)
		}
		return x, nil
	}
}

// current reports whether e is the registered record of its ID.
func (h *Host) current(e *execution) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.execs[e.id] == e && !e.terminated.Load()
}

func (e *execution) describe() *exechost.Execution {
	return &exechost.Execution{ExecutionID: e.id, ImageDigest: e.imageID, Deadline: e.deadline}
}

// forget drops e from the table if it is still the registered record; an
// ended execution leaves a tombstone.
func (h *Host) forget(e *execution, ended bool) (containerID string, b *boundary) {
	h.mu.Lock()
	if h.execs[e.id] == e {
		delete(h.execs, e.id)
		if ended {
			h.tombstone(e.id)
		}
	}
	t, containerID, b := e.timer, e.containerID, e.egress
	h.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	return containerID, b
}

// tombstone records an ended ID; h.mu is held.
func (h *Host) tombstone(id exechost.ExecutionID) {
	now := time.Now()
	if len(h.gone) >= maxTombstones {
		for k, t := range h.gone {
			if now.Sub(t) > time.Hour || len(h.gone) >= maxTombstones {
				delete(h.gone, k)
			}
		}
	}
	h.gone[id] = now
}

func (h *Host) provision(ctx context.Context, e *execution, req exechost.ProvisionRequest) (*exechost.Execution, error) {
	start := time.Now()
	img, err := h.images.ensure(ctx, req.Image)
	if err != nil {
		return nil, err
	}
	if img.Config != nil {
		if err := policy.CheckImageVolumes(img.Config.Volumes); err != nil {
			return nil, err
		}
	}

	// Everything the workspace needs is checked before a container exists.
	var layers []workspace.Opener
	switch ws := req.Workspace; {
	case ws.Git != nil:
		// Resolved, listed and checked against the budget before any
		// container exists; streamed from raw objects once it does.
		tree, err := h.git.Prepare(ctx, *ws.Git, req.Resources.DiskBytes)
		if err != nil {
			return nil, err
		}
		layers = append(layers, tree.Open)
	case len(ws.Checkpoints) > 0:
		opened, err := h.openCheckpoints(ctx, ws.Checkpoints)
		if err != nil {
			return nil, err
		}
		defer opened.close()
		layers = opened.openers()
	}
	// Read up to the first entry (snapshot.go: an empty one needs no exec).
	limits := workspace.Limits{MaxBytes: req.Resources.DiskBytes, MaxEntries: h.entries}
	imp, err := workspace.Prepare(ctx, limits, layers...)
	if err != nil {
		return nil, importError(req, err)
	}
	defer imp.Close()

	if id := h.takePooled(ctx, e, req, img.ID); id != "" {
		// A warm-pool sandbox: its runtime starts now (pool.go).
		fail := func(err error) (*exechost.Execution, error) {
			e.launch.Swap(nil).Close()
			h.remove(context.WithoutCancel(ctx), id)
			return nil, err
		}
		if e.terminated.Load() {
			return fail(exechost.ErrTerminated)
		}
		e.env = policy.ProvisionEnv(req)
		return h.ready(ctx, e, req, img.ID, id, time.Now().Add(req.Resources.Runtime), imp, start, fail)
	}

	deadline := time.Now().Add(req.Resources.Runtime)
	meta := policy.Meta{Owner: h.owner, ImageID: img.ID, Deadline: deadline}
	spec := h.spec(req, meta)
	// A NetworkEgress sandbox gets its own network first; its proxy starts
	// while the sandbox does (each is a container start), and Provision
	// returns once both are up. Until then the boundary is provision's
	// alone: every exit below waits for the proxy's start and closes it.
	var b *boundary
	var proxyDone chan error
	waitProxy := func() error {
		if proxyDone == nil {
			return nil
		}
		err := <-proxyDone
		proxyDone = nil
		return err
	}
	if req.Network == exechost.NetworkEgress {
		if b, err = h.prepareBoundary(ctx, req, meta); err != nil {
			return nil, err
		}
		spec = policy.WithEgress(spec, b.networkName, len(b.bundle) > 0)
		proxyDone = make(chan error, 1)
		go func() { proxyDone <- h.startProxy(ctx, req, meta, b) }()
	}
	id, err := h.create(ctx, req.ExecutionID, spec)
	if err != nil {
		_ = waitProxy()
		h.closeBoundary(ctx, b)
		return nil, err
	}
	// From here on a failure must remove the container (and the boundary).
	fail := func(err error) (*exechost.Execution, error) {
		_ = waitProxy()
		h.remove(context.WithoutCancel(ctx), id)
		h.closeBoundary(ctx, b)
		return nil, err
	}
	h.mu.Lock()
	e.containerID = id
	h.mu.Unlock()
	if e.terminated.Load() {
		return fail(exechost.ErrTerminated)
	}
	if err := h.c.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return fail(fmt.Errorf("start sandbox: %w", err))
	}
	if b != nil {
		if len(b.bundle) > 0 {
			if err := h.writeBundle(ctx, id, b.bundle); err != nil {
				return fail(err)
			}
		}
		if err := waitProxy(); err != nil {
			return fail(err)
		}
		e.proxyEnv = policy.ProxyEnv(b.proxyIP)
		// Published once complete: from here Terminate and lost close it
		// too (closeBoundary runs once).
		h.mu.Lock()
		e.egress = b
		h.mu.Unlock()
	}
	return h.ready(ctx, e, req, img.ID, id, deadline, imp, start, fail)
}

// ready finishes a provision whose container id runs: the workspace (imp,
// prepared before the container existed), the host-side deadline, the
// record. fail removes what the provision made.
func (h *Host) ready(ctx context.Context, e *execution, req exechost.ProvisionRequest, imageID, id string,
	deadline time.Time, imp *workspace.Pending, start time.Time,
	fail func(error) (*exechost.Execution, error)) (*exechost.Execution, error) {
	e.imageID, e.image = imageID, req.Image
	e.resources, e.deadline = req.Resources, deadline
	// An import with nothing to unpack returns at once, without an exec.
	ictx, cancel := context.WithDeadline(ctx, deadline)
	res, err := imp.Import(ictx, h.run, id, h.policy.User())
	cancel()
	e.inherited = res.Names
	if err != nil {
		return fail(importError(req, err))
	}
	// The host-side deadline, in case the in-container one does not fire.
	h.mu.Lock()
	e.timer = time.AfterFunc(time.Until(deadline)+time.Second, func() { h.expire(e) })
	h.mu.Unlock()
	e.ready = true
	if e.terminated.Load() { // Terminate raced with the last steps
		return fail(exechost.ErrTerminated)
	}
	h.log.Debug("provisioned sandbox", "execution_id", req.ExecutionID, "container_id", id,
		"image", imageID, "pooled", e.poolSlot != "", "duration_ms", time.Since(start).Milliseconds())
	return e.describe(), nil
}

// spec is the container configuration of a sandbox on this host: the
// policy's, plus this host's runtime adjustments (HostConfig.Runtime and,
// under runsc, the PIDs overhead). Provision and Preflight both build
// through it, so the preflight checks exactly what sandboxes get.
func (h *Host) spec(req exechost.ProvisionRequest, meta policy.Meta) policy.Spec {
	spec := h.policy.Build(req, meta)
	if h.runtime != "" {
		spec.HostConfig.Runtime = h.runtime
		spec.HostConfig.PidsLimit = withRuntimePids(h.runtime, spec.HostConfig.PidsLimit)
	}
	return spec
}

// create makes the container, replacing a leftover with the same name that
// an earlier attempt (of this or a dead process) left behind.
func (h *Host) create(ctx context.Context, execID exechost.ExecutionID, spec policy.Spec) (string, error) {
	for attempt := 0; ; attempt++ {
		resp, err := h.c.ContainerCreate(ctx, spec.Config, spec.HostConfig, spec.Network, nil, spec.Name)
		if err == nil {
			for _, w := range resp.Warnings {
				h.log.Warn("docker create warning", "execution_id", execID, "warning", w)
			}
			return resp.ID, nil
		}
		if !errdefs.IsConflict(err) || attempt > 0 {
			return "", fmt.Errorf("create sandbox: %w", err)
		}
		if err := h.replaceLeftover(ctx, execID, spec.Name); err != nil {
			return "", fmt.Errorf("create sandbox: %w", err)
		}
	}
}

// replaceLeftover removes the container holding name when it is a sandbox
// of execID that an earlier attempt (of this or a dead process) left
// behind: labelled with execID, or a warm-pool sandbox (labelled with its
// pool slot) that was renamed to execID's name when taken.
func (h *Host) replaceLeftover(ctx context.Context, execID exechost.ExecutionID, name string) error {
	old, err := h.c.ContainerInspect(ctx, name)
	if errdefs.IsNotFound(err) {
		return nil // removed meanwhile (auto-remove)
	}
	if err != nil {
		return fmt.Errorf("inspect %s: %w", name, err)
	}
	if old.Config == nil || old.Config.Labels[policy.LabelManaged] != "true" ||
		(old.Config.Labels[policy.LabelExecution] != string(execID) && old.Config.Labels[policy.LabelPool] == "") {
		return fmt.Errorf("name %s is taken by a container agentflow does not manage", name)
	}
	h.log.Info("replacing leftover sandbox", "execution_id", execID, "container_id", old.ID,
		"owner", old.Config.Labels[policy.LabelOwner])
	h.remove(ctx, old.ID)
	return nil
}

func (h *Host) remove(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := h.c.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !errdefs.IsNotFound(err) && !errdefs.IsConflict(err) {
		h.log.Warn("remove sandbox", "container_id", id, "error", err)
		return
	}
	// A conflict means auto-remove (the in-container deadline) is already
	// removing it. Either way, wait until the daemon no longer lists the
	// container, so "destroyed" means gone when the caller sees it.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := h.c.ContainerInspect(ctx, id); errdefs.IsNotFound(err) {
			return
		}
		select {
		case <-ctx.Done():
			h.log.Warn("sandbox still listed after removal", "container_id", id)
			return
		case <-tick.C:
		}
	}
}

// lookup returns a live execution, locked. The caller unlocks e.mu.
func (h *Host) lookup(id exechost.ExecutionID) (*execution, error) {
	h.mu.Lock()
	e, ok := h.execs[id]
	_, ended := h.gone[id]
	h.mu.Unlock()
	if !ok {
		if ended {
			return nil, fmt.Errorf("execution %s: %w", id, exechost.ErrTerminated)
		}
		return nil, fmt.Errorf("execution %s: %w", id, exechost.ErrNotFound)
	}
	e.mu.Lock()
	if !e.ready {
		e.mu.Unlock()
		return nil, fmt.Errorf("execution %s: %w", id, exechost.ErrNotFound)
	}
	if e.terminated.Load() {
		e.mu.Unlock()
		return nil, fmt.Errorf("execution %s: %w", id, exechost.ErrTerminated)
	}
	return e, nil
}

// lost records that the sandbox is gone (destroyed by a limit, removed
// underneath us, or past its deadline).
func (h *Host) lost(e *execution) {
	e.terminated.Store(true)
	e.launch.Swap(nil).Close()
	id, b := h.forget(e, true)
	if id != "" {
		h.remove(context.Background(), id)
	}
	h.closeBoundary(context.Background(), b)
}

// expire is the host-side runtime deadline.
func (h *Host) expire(e *execution) {
	if e.terminated.Load() {
		return
	}
	h.log.Info("sandbox deadline passed", "execution_id", e.id, "container_id", e.containerID)
	h.lost(e)
}

// Terminate implements exechost.ExecutionHost. It does not wait for a
// running Exec: removing the container ends it, and that Exec returns
// ErrTerminated.
func (h *Host) Terminate(ctx context.Context, id exechost.ExecutionID) error {
	h.mu.Lock()
	e, ok := h.execs[id]
	var containerID string
	var b *boundary
	if ok {
		delete(h.execs, id)
		h.tombstone(id)
		e.terminated.Store(true)
		e.launch.Swap(nil).Close()
		containerID, b = e.containerID, e.egress
		if e.timer != nil {
			e.timer.Stop()
		}
	}
	h.mu.Unlock()
	if !ok {
		return nil
	}
	// A provision still before container creation sees terminated and
	// removes its own container (and boundary).
	if b != nil {
		// The sandbox and its proxy go at once; the network goes when its
		// last member has (removeNetwork waits for that).
		var wg sync.WaitGroup
		if containerID != "" {
			wg.Go(func() { h.remove(context.WithoutCancel(ctx), containerID) })
		}
		h.closeBoundary(ctx, b)
		wg.Wait()
		return nil
	}
	if containerID != "" {
		err := h.c.ContainerRemove(context.WithoutCancel(ctx), containerID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !errdefs.IsNotFound(err) && !errdefs.IsConflict(err) {
			return fmt.Errorf("terminate %s: %w", id, err)
		}
	}
	return nil
}

// Reap removes stale sandboxes: see the package-level Reap. Sandboxes of
// this host that it no longer tracks are reaped too. labels, if any, narrow
// the sweep.
func (h *Host) Reap(ctx context.Context, labels map[string]string) ([]Reaped, error) {
	return Reap(ctx, h.c, ReapOptions{
		Owner:  h.owner,
		Labels: labels,
		Logger: h.log,
		Keep: func(id exechost.ExecutionID) bool {
			// id is an execution, or the pool slot of a pooled sandbox:
			// idle or starting (the pool's), or taken (an execution's).
			// A take records the slot on the execution before the pool
			// forgets it, so one of the two always has it.
			h.mu.Lock()
			_, ok := h.execs[id]
			for _, e := range h.execs {
				if ok {
					break
				}
				ok = e.poolSlot != "" && e.poolSlot == string(id)
			}
			h.mu.Unlock()
			return ok || (h.pool != nil && h.pool.tracks(string(id)))
		},
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
