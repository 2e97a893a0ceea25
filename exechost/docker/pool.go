package docker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker/policy"
	"github.com/agentflow/agentflow/exechost/docker/runner"
)

// The warm pool keeps fresh, never-used, started sandboxes per pool key so
// a Provision can take one instead of creating and starting a container
// (most of a step's cost). Opt-in (PoolOptions.Size > 0); docs/DECISIONS.md
// 153 explains the rules:
//
//   - A key is the image ID plus everything of the container configuration
//     the request determines (limits, tmpfs size, runtime, user, network
//     none): the hash of Build's output for the request's PoolTemplate.
//     Keys are learned from Provision calls (a miss teaches the key) and
//     forgotten after KeyIdle without a Provision.
//   - A pooled sandbox serves one Provision. Its name, env and the
//     host-side deadline are the execution's from then on: it is renamed
//     to the execution's container name, its env travels with every exec
//     (policy.MergeEnv), and its runtime counts from the take. It is never
//     given back: Terminate removes it like any sandbox.
//   - Its keeper (PID 1) sleeps MaxIdle + Runtime + poolSlack, and an idle
//     sandbox older than MaxIdle is removed and replaced, so a sandbox is
//     never taken with less than its runtime left in its keeper. Its
//     deadline label is that backstop, so the reaper's rules hold as they
//     are.
//   - Only NetworkNone, no GPU, no git workspace, and only requests whose
//     labels include every PoolOptions.Labels entry (a pooled container
//     never carries a label its request did not ask for; it lacks the
//     request's own labels, which cannot be set after create).

// DefaultPoolMaxIdle is how long a pooled sandbox may wait to be taken.
const DefaultPoolMaxIdle = time.Minute

// DefaultPoolKeyIdle is how long a key without a Provision keeps its pool.
const DefaultPoolKeyIdle = 10 * time.Minute

// poolSlack is added to a pooled keeper on top of MaxIdle + Runtime: the
// time between the take and the start of the host-side runtime (rename),
// and the host timer's own second.
const poolSlack = 5 * time.Second

// poolRetry is how long a key waits after a failed create.
const poolRetry = 10 * time.Second

// PoolOptions configure the warm pool. The zero value is off.
type PoolOptions struct {
	// Size is how many idle sandboxes are kept per key (0: no pool).
	Size int
	// MaxTotal bounds idle and starting pooled sandboxes over all keys
	// (default 4 × Size).
	MaxTotal int
	// MaxIdle is how long a pooled sandbox may wait; older ones are
	// removed and replaced (default DefaultPoolMaxIdle). It is also how
	// much longer than its runtime a pooled sandbox's in-container keeper
	// runs (docs/SECURITY.md S2).
	MaxIdle time.Duration
	// KeyIdle: a key without a Provision for this long is dropped with its
	// sandboxes (default DefaultPoolKeyIdle).
	KeyIdle time.Duration
	// Creates bounds concurrent pool creates (default 1).
	Creates int
	// Labels go on every pooled sandbox (the worker's --sandbox-label set);
	// a request is served from the pool only if its labels include them all.
	Labels map[string]string
	// OnTake, if set, is told each poolable Provision's outcome (metrics).
	OnTake func(hit bool)
	// Warm are files in the image each pooled sandbox reads once when it
	// is filled (the worker's: the tool binary), so its first command
	// does not pay their first read (runner.PrepareOptions.Warm).
	Warm []string
}

// PoolStats counts takes since the host was built.
type PoolStats struct {
	Hits, Misses int
	Idle         int // idle sandboxes now
	// Launched counts pooled sandboxes whose first command started
	// through their prepared launcher (the others exec'd it).
	Launched int
}

type pool struct {
	h    *Host
	opts PoolOptions
	tick time.Duration

	mu       sync.Mutex
	keys     map[string]*poolKey
	members  map[string]*member // pool slot → starting or idle sandbox
	starting int
	closed   bool
	hits     int
	misses   int
	launched int

	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	work   sync.WaitGroup // creates and removals in flight
}

type poolKey struct {
	key      string
	tmpl     exechost.ProvisionRequest
	imageID  string
	lastUsed time.Time
	idle     []*member // oldest first
	starting int
	retryAt  time.Time
}

type member struct {
	slot        string // the container's execution label: "pool-<hex>"
	key         string
	containerID string
	created     time.Time
	// launch is the launcher started in it for its first command (nil if
	// it could not be: the sandbox is served all the same).
	launch *runner.Prepared
}

func newPool(h *Host, opts PoolOptions) *pool {
	if opts.MaxTotal <= 0 {
		opts.MaxTotal = 4 * opts.Size
	}
	if opts.MaxIdle <= 0 {
		opts.MaxIdle = DefaultPoolMaxIdle
	}
	if opts.KeyIdle <= 0 {
		opts.KeyIdle = DefaultPoolKeyIdle
	}
	if opts.Creates <= 0 {
		opts.Creates = 1
	}
	opts.Labels = maps.Clone(opts.Labels)
	opts.Warm = slices.Clone(opts.Warm)
	ctx, cancel := context.WithCancel(context.Background())
	p := &pool{
		h: h, opts: opts, tick: min(max(opts.MaxIdle/8, 100*time.Millisecond), 5*time.Second),
		keys: make(map[string]*poolKey), members: make(map[string]*member),
		wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{}),
	}
	go p.run(ctx)
	return p
}

// poolable reports whether req may be served from the pool.
func (p *pool) poolable(req exechost.ProvisionRequest) bool {
	if req.Network == exechost.NetworkEgress || req.Resources.GPUs != 0 || req.Workspace.Git != nil {
		return false
	}
	for k, v := range p.opts.Labels {
		if w, ok := req.Labels[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// take hands out the oldest fresh idle sandbox of req's key, or nil (a
// miss, which teaches the pool the key). The member stays in members (so
// the reaper keeps it) until the caller has recorded it and calls release.
func (p *pool) take(req exechost.ProvisionRequest, imageID string) *member {
	key := p.h.poolKey(req, imageID)
	now := time.Now()
	var stale []*member
	var got *member
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	k := p.keys[key]
	if k == nil {
		k = &poolKey{key: key, tmpl: policy.PoolTemplate(req), imageID: imageID}
		p.keys[key] = k
	}
	k.lastUsed = now
	for len(k.idle) > 0 && got == nil {
		m := k.idle[0]
		k.idle = k.idle[1:]
		if now.Sub(m.created) < p.opts.MaxIdle {
			got = m
		} else {
			stale = append(stale, m)
		}
	}
	for _, m := range stale {
		delete(p.members, m.slot)
	}
	if got != nil {
		p.hits++
	} else {
		p.misses++
	}
	p.mu.Unlock()
	p.removeAsync(stale)
	p.poke()
	if p.opts.OnTake != nil {
		p.opts.OnTake(got != nil)
	}
	p.h.log.Debug("sandbox pool", "hit", got != nil, "pool_key", key)
	return got
}

// release forgets a taken member: the execution that took it tracks it now.
func (p *pool) release(m *member) {
	p.mu.Lock()
	delete(p.members, m.slot)
	p.mu.Unlock()
}

// countLaunched counts a first command started through a launcher.
func (p *pool) countLaunched() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.launched++
	p.mu.Unlock()
}

// tracks reports whether slot is a starting or idle pooled sandbox.
func (p *pool) tracks(slot string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.members[slot]
	return ok
}

func (p *pool) stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := PoolStats{Hits: p.hits, Misses: p.misses, Launched: p.launched}
	for _, k := range p.keys {
		s.Idle += len(k.idle)
	}
	return s
}

func (p *pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *pool) run(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(p.tick)
	defer t.Stop()
	for {
		p.maintain()
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-t.C:
		}
	}
}

// maintain drops expired sandboxes and idle keys, then starts creates for
// the keys short of Size, most recently used first, within Creates and
// MaxTotal.
func (p *pool) maintain() {
	now := time.Now()
	var drop []*member
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	for key, k := range p.keys {
		if now.Sub(k.lastUsed) > p.opts.KeyIdle {
			drop = append(drop, k.idle...)
			k.idle = nil
			delete(p.keys, key) // a create in flight for it removes what it made
			continue
		}
		fresh := k.idle[:0]
		for _, m := range k.idle {
			if now.Sub(m.created) >= p.opts.MaxIdle {
				drop = append(drop, m)
			} else {
				fresh = append(fresh, m)
			}
		}
		k.idle = fresh
	}
	for _, m := range drop {
		delete(p.members, m.slot)
	}
	keys := make([]*poolKey, 0, len(p.keys))
	for _, k := range p.keys {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].lastUsed.After(keys[j].lastUsed) })
	type start struct {
		k *poolKey
		m *member
	}
	var starts []start
	for _, k := range keys {
		for p.starting < p.opts.Creates && len(k.idle)+k.starting < p.opts.Size && now.After(k.retryAt) {
			if len(p.members) >= p.opts.MaxTotal {
				// At the cap: a more recently used key may take the place
				// of the least recently used key's oldest idle sandbox.
				victim := lruWithIdle(keys, k)
				if victim == nil {
					break
				}
				m := victim.idle[0]
				victim.idle = victim.idle[1:]
				delete(p.members, m.slot)
				drop = append(drop, m)
			}
			m := &member{slot: "pool-" + randomHex(8), key: k.key}
			p.members[m.slot] = m
			k.starting++
			p.starting++
			starts = append(starts, start{k, m})
		}
	}
	for _, s := range starts {
		p.work.Add(1)
		go p.create(s.k, s.m)
	}
	p.mu.Unlock()
	p.removeAsync(drop)
}

// lruWithIdle is the least recently used key other than (and used before)
// k that has an idle sandbox; keys is sorted most recent first.
func lruWithIdle(keys []*poolKey, k *poolKey) *poolKey {
	for i := len(keys) - 1; i >= 0 && keys[i] != k; i-- {
		if len(keys[i].idle) > 0 {
			return keys[i]
		}
	}
	return nil
}

// create makes and starts one pooled sandbox for k. It runs on its own
// context: a create the daemon has done must be seen, or its container
// would be left to the reaper; Drain waits for it instead.
func (p *pool) create(k *poolKey, m *member) {
	defer p.work.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m.created = time.Now()
	id, launch, err := p.createPooled(ctx, k, m)
	p.mu.Lock()
	k.starting--
	p.starting--
	if err != nil {
		delete(p.members, m.slot)
		k.retryAt = time.Now().Add(poolRetry)
		p.mu.Unlock()
		p.h.log.Warn("sandbox pool: create", "pool_key", k.key, "error", err)
		return
	}
	m.containerID, m.launch = id, launch
	if p.closed || p.keys[k.key] != k {
		delete(p.members, m.slot)
		p.mu.Unlock()
		p.discard(ctx, m)
		return
	}
	k.idle = append(k.idle, m)
	p.mu.Unlock()
	p.h.log.Debug("sandbox pool: ready", "pool_key", k.key, "container_id", id)
	p.poke()
}

// removeAsync removes pooled sandboxes that will not be served.
func (p *pool) removeAsync(ms []*member) {
	if len(ms) == 0 {
		return
	}
	p.work.Add(1)
	go func() {
		defer p.work.Done()
		for _, m := range ms {
			p.discard(context.Background(), m)
		}
	}()
}

// drain stops the pool and removes every pooled sandbox, waiting for
// creates in flight. Later Provisions run cold.
func (p *pool) drain(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var idle []*member
	for _, k := range p.keys {
		idle = append(idle, k.idle...)
		k.idle = nil
	}
	for _, m := range idle {
		delete(p.members, m.slot)
	}
	p.mu.Unlock()
	p.cancel()
	<-p.done
	var wg sync.WaitGroup
	for _, m := range idle {
		wg.Go(func() { p.discard(ctx, m) })
	}
	wg.Wait()
	flushed := make(chan struct{})
	go func() { p.work.Wait(); close(flushed) }()
	select {
	case <-flushed:
	case <-ctx.Done():
		return fmt.Errorf("drain sandbox pool: %w", ctx.Err())
	}
	if n := len(idle); n > 0 {
		p.h.log.Info("sandbox pool drained", "removed", n)
	}
	return nil
}

// discard removes a pooled sandbox that will not be served.
func (p *pool) discard(ctx context.Context, m *member) {
	m.launch.Close()
	p.h.remove(ctx, m.containerID)
}

// createPooled creates and starts the container of pool slot m for key k,
// and starts the launcher of its first command (runner.Prepare) as the
// tool's user: the exec a step would wait for is paid here. A sandbox
// whose launcher cannot start is pooled without one.
func (p *pool) createPooled(ctx context.Context, k *poolKey, m *member) (string, *runner.Prepared, error) {
	h := p.h
	keeper := p.opts.MaxIdle + k.tmpl.Resources.Runtime + poolSlack
	req := k.tmpl
	req.ExecutionID = exechost.ExecutionID(m.slot)
	req.Labels = p.opts.Labels
	meta := policy.Meta{Owner: h.owner, ImageID: k.imageID, Deadline: m.created.Add(keeper)}
	spec := policy.Pooled(h.spec(req, meta), k.key, keeper)
	resp, err := h.c.ContainerCreate(ctx, spec.Config, spec.HostConfig, spec.Network, nil, spec.Name)
	if err != nil {
		return "", nil, fmt.Errorf("create pooled sandbox: %w", err)
	}
	if err := h.c.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		h.remove(context.WithoutCancel(ctx), resp.ID)
		return "", nil, fmt.Errorf("start pooled sandbox: %w", err)
	}
	var launch *runner.Prepared
	ins, err := h.c.ContainerInspect(ctx, resp.ID)
	if err == nil && ins.Config == nil {
		err = fmt.Errorf("inspect %s: no configuration", resp.ID)
	}
	if err == nil {
		launch, err = h.run.Prepare(ctx, resp.ID, runner.PrepareOptions{
			User: h.policy.User(), WorkDir: policy.WorkspaceDir, Env: ins.Config.Env, Warm: p.opts.Warm})
	}
	if err != nil {
		h.log.Debug("sandbox pool: no launcher; the first command will exec", "container_id", resp.ID, "error", err)
	}
	return resp.ID, launch, nil
}
