// Package hosttest holds a contract-checking in-memory ExecutionHost (Fake)
// and the contract suite (Run) that every ExecutionHost must pass. The same
// suite runs against the Fake and the Docker reference host, so engine unit
// tests written against the Fake exercise the behaviour production sees.
package hosttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/gitsource"
)

// Options configure a Fake. The zero value is usable.
type Options struct {
	// Handler plays every Exec (default DefaultHandler).
	Handler Handler
	// Rules is the validation the Fake applies: the host-neutral
	// exechost.Validator every host runs, so the Fake and a real host
	// refuse the same requests.
	Rules exechost.Validator
	// Images are the image references that exist. Empty: every pinned
	// reference exists.
	Images []string
	// Git imports a git workspace (default: gitsource with GitSource's
	// roots and budget, as on the Docker host; regular files only).
	Git func(ctx context.Context, src exechost.GitSource) (map[string]File, error)
	// GitSource configures the default Git: repository roots (none refuses
	// every git workspace, as a worker without --git-root does) and budget.
	GitSource gitsource.Config
}

// Stats count what the Fake did, so tests can assert that nothing leaked.
type Stats struct {
	Provisioned int // sandboxes created (Provision and Restore)
	Terminated  int // live sandboxes ended by Terminate
	Destroyed   int // sandboxes ended by a timeout, output cap, abort or deadline
	Live        int // sandboxes alive now
	// Overlaps counts Exec/Checkpoint calls that ran at the same time on one
	// execution: always 0 unless the Fake's own serialisation is broken.
	Overlaps int
}

// Fake is an in-memory ExecutionHost that enforces the exechost contract:
// same validation and sentinel errors as the Docker host, Exec/Checkpoint
// serialised per execution, limits destroy the sandbox, checkpoints are deep
// copies layered in order. It is safe for concurrent use.
type Fake struct {
	handler Handler
	rules   exechost.Validator
	images  map[string]bool
	git     func(ctx context.Context, src exechost.GitSource, maxBytes int64) (map[string]File, error)

	mu          sync.Mutex
	execs       map[exechost.ExecutionID]*execution
	gone        map[exechost.ExecutionID]bool
	checkpoints map[exechost.CheckpointID]*stored
	// egress is the policy each ID's latest sandbox was provisioned with
	// (NetworkEgress only), kept after it ended so a test can read what
	// the sandbox was given once the code under test terminated it.
	egress   map[exechost.ExecutionID]*exechost.EgressPolicy
	stats    Stats
	overlaps atomic.Int64
}

var _ exechost.ExecutionHost = (*Fake)(nil)

// execution is one fake sandbox. mu serialises Exec and Checkpoint; killed
// is closed when the sandbox is destroyed, which is how a running Exec
// learns that Terminate or the deadline removed it.
type execution struct {
	mu        sync.Mutex
	busy      atomic.Int32
	id        exechost.ExecutionID
	image     string
	digest    string
	resources exechost.ResourceLimits
	env       map[string]string
	labels    map[string]string
	deadline  time.Time
	timer     *time.Timer
	ws        *Workspace
	killed    chan struct{}
	expired   atomic.Bool
	// inherited are the paths the workspace was provisioned with: exempt
	// from a checkpoint's name refusal, as on the Docker host.
	inherited map[string]bool
	// events is the egress policy's Events (nil: network none, or no
	// receiver). evMu serialises deliveries (EmitEgress) with the end of
	// the sandbox; evDone, set under it when the sandbox ends, stops them,
	// so none is delivered after Terminate (or a kill) returned.
	events func(exechost.EgressEvent)
	evMu   sync.Mutex
	evDone bool
}

// stored is one checkpoint.
type stored struct {
	meta  exechost.Checkpoint
	res   exechost.ResourceLimits
	files map[string]File
}

// NewFake returns a Fake.
func NewFake(opts Options) (*Fake, error) {
	f := &Fake{
		handler:     opts.Handler,
		rules:       opts.Rules,
		execs:       map[exechost.ExecutionID]*execution{},
		gone:        map[exechost.ExecutionID]bool{},
		checkpoints: map[exechost.CheckpointID]*stored{},
		egress:      map[exechost.ExecutionID]*exechost.EgressPolicy{},
	}
	if f.handler == nil {
		f.handler = DefaultHandler
	}
	if opts.Git != nil {
		f.git = func(ctx context.Context, src exechost.GitSource, _ int64) (map[string]File, error) {
			return opts.Git(ctx, src)
		}
	} else {
		im, err := gitsource.New(opts.GitSource)
		if err != nil {
			return nil, err
		}
		f.git = func(ctx context.Context, src exechost.GitSource, maxBytes int64) (map[string]File, error) {
			return gitFiles(ctx, im, src, maxBytes)
		}
	}
	if len(opts.Images) > 0 {
		f.images = map[string]bool{}
		for _, im := range opts.Images {
			f.images[im] = true
		}
	}
	return f, nil
}

// Provision implements exechost.ExecutionHost. A second Provision of a live
// execution with the same image returns it unchanged, as on the Docker host.
func (f *Fake) Provision(ctx context.Context, req exechost.ProvisionRequest) (*exechost.Execution, error) {
	if err := f.rules.ValidateProvision(req); err != nil {
		return nil, fmt.Errorf("provision %s: %w", req.ExecutionID, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("provision %s: %w", req.ExecutionID, err)
	}
	// A live execution answers a retry before anything else is looked at.
	if x, err := f.existing(req); x != nil || err != nil {
		return x, err
	}
	if f.images != nil && !f.images[req.Image] {
		// As every host: an image that cannot be had is ErrImageNotFound,
		// which is also a "not found" of the contract.
		return nil, fmt.Errorf("provision %s: image %s: %w: %w", req.ExecutionID, req.Image, exechost.ErrImageNotFound, exechost.ErrNotFound)
	}
	files := map[string]File{}
	switch ws := req.Workspace; {
	case ws.Git != nil:
		g, err := f.git(ctx, *ws.Git, req.Resources.DiskBytes)
		if err != nil {
			return nil, fmt.Errorf("provision %s: %w", req.ExecutionID, err)
		}
		files = g
	case len(ws.Checkpoints) > 0:
		f.mu.Lock()
		for _, id := range ws.Checkpoints {
			ck, ok := f.checkpoints[id]
			if !ok {
				f.mu.Unlock()
				return nil, fmt.Errorf("provision %s: checkpoint %s: %w", req.ExecutionID, id, exechost.ErrNotFound)
			}
			// Every byte is checked against what the checkpoint recorded,
			// as the Docker host's store does (see TamperCheckpoint).
			if size, sum := digestFiles(ck.files); size != ck.meta.SizeBytes || sum != ck.meta.SHA256 {
				f.mu.Unlock()
				return nil, fmt.Errorf("provision %s: checkpoint %s: content does not match its digest: %w",
					req.ExecutionID, id, exechost.ErrCorruptCheckpoint)
			}
			layer(files, ck.files)
		}
		f.mu.Unlock()
	}
	var size int64
	for _, fl := range files {
		size += int64(len(fl.Data))
	}
	if size > req.Resources.DiskBytes {
		err := fmt.Errorf("workspace of %d bytes: %w", size, ErrNoSpace)
		if len(req.Workspace.Checkpoints) > 0 {
			err = fmt.Errorf("%w: %w", exechost.ErrCorruptCheckpoint, err) // as the Docker host reports it
		}
		return nil, fmt.Errorf("provision %s: %w", req.ExecutionID, err)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if x, err := f.existingLocked(req); x != nil || err != nil {
		return x, err // a concurrent Provision of the same ID won
	}
	e := &execution{
		id:        req.ExecutionID,
		image:     req.Image,
		digest:    imageDigest(req.Image),
		resources: req.Resources,
		env:       maps.Clone(req.Env),
		labels:    maps.Clone(req.Labels),
		deadline:  time.Now().Add(req.Resources.Runtime),
		ws:        newWorkspace(files, req.Resources.DiskBytes),
		killed:    make(chan struct{}),
		inherited: make(map[string]bool, len(files)),
	}
	for p := range files {
		e.inherited[p] = true
	}
	delete(f.egress, req.ExecutionID)
	if req.Network == exechost.NetworkEgress {
		f.egress[req.ExecutionID] = copyEgressPolicy(req.Egress)
		e.events = req.Egress.Events
	}
	e.timer = time.AfterFunc(req.Resources.Runtime, func() {
		e.expired.Store(true)
		f.end(e, false)
	})
	f.execs[req.ExecutionID] = e
	delete(f.gone, req.ExecutionID) // an ID may be provisioned again after it ended
	f.stats.Provisioned++
	return e.describe(), nil
}

// existing answers a Provision of an ID that is live: the same image gets
// the execution back, another image is refused.
func (f *Fake) existing(req exechost.ProvisionRequest) (*exechost.Execution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.existingLocked(req)
}

func (f *Fake) existingLocked(req exechost.ProvisionRequest) (*exechost.Execution, error) {
	e, ok := f.execs[req.ExecutionID]
	switch {
	case !ok:
		return nil, nil
	case e.image != req.Image:
		return nil, fmt.Errorf("provision %s: already running with image %s: %w",
			req.ExecutionID, e.image, &exechost.PolicyError{Field: "execution_id", Reason: "in use with another image"})
	}
	return e.describe(), nil
}

func (e *execution) describe() *exechost.Execution {
	return &exechost.Execution{ExecutionID: e.id, ImageDigest: e.digest, Deadline: e.deadline}
}

// imageDigest is the immutable identity of a pinned reference.
func imageDigest(ref string) string {
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		return ref[i+1:]
	}
	return ref
}

// end destroys e if it is still the live record of its ID; byTerminate says
// who asked, for the counters. It reports whether this call ended it.
func (f *Fake) end(e *execution, byTerminate bool) bool {
	f.mu.Lock()
	if f.execs[e.id] != e {
		f.mu.Unlock()
		return false
	}
	delete(f.execs, e.id)
	f.gone[e.id] = true
	if byTerminate {
		f.stats.Terminated++
	} else {
		f.stats.Destroyed++
	}
	f.mu.Unlock()
	e.timer.Stop()
	e.ws.destroy()
	// Waits for a delivery in progress; none starts after this.
	e.evMu.Lock()
	e.evDone = true
	e.evMu.Unlock()
	close(e.killed)
	return true
}

// acquire returns the live execution id, holding its serialisation lock.
// The caller unlocks e.mu.
func (f *Fake) acquire(id exechost.ExecutionID) (*execution, error) {
	f.mu.Lock()
	e, ok := f.execs[id]
	ended := f.gone[id]
	f.mu.Unlock()
	switch {
	case !ok && ended:
		return nil, exechost.ErrTerminated
	case !ok:
		return nil, exechost.ErrNotFound
	}
	e.mu.Lock()
	select {
	case <-e.killed: // destroyed while we waited for the lock
		e.mu.Unlock()
		return nil, exechost.ErrTerminated
	default:
	}
	return e, nil
}

// enter is the overlap detector: Exec and Checkpoint call it once they
// hold e.mu. If two ever get in at once the serialisation is broken and
// Stats.Overlaps says so.
func (f *Fake) enter(e *execution) (leave func()) {
	if e.busy.Add(1) != 1 {
		f.overlaps.Add(1)
	}
	return func() { e.busy.Add(-1) }
}

// Terminate implements exechost.ExecutionHost. It does not wait for a
// running Exec: destroying the sandbox ends it with ErrTerminated.
func (f *Fake) Terminate(_ context.Context, id exechost.ExecutionID) error {
	f.mu.Lock()
	e, ok := f.execs[id]
	f.mu.Unlock()
	if ok {
		f.end(e, true)
	}
	return nil
}

// Checkpoint implements exechost.ExecutionHost.
func (f *Fake) Checkpoint(ctx context.Context, id exechost.ExecutionID, req exechost.CheckpointRequest) (*exechost.Checkpoint, error) {
	e, err := f.acquire(id)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", id, err)
	}
	defer e.mu.Unlock()
	defer f.enter(e)()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", id, err)
	}
	files, err := e.ws.snapshot()
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", id, err)
	}
	// Redaction as the Docker host's export filter does it (and with its
	// code): a name is refused, never quoted, unless the sandbox was
	// provisioned with it; content keeps its length.
	for p, fl := range files {
		if fl.Symlink != "" {
			if err := exechost.CheckSymlink(p, fl.Symlink); err != nil {
				return nil, fmt.Errorf("checkpoint %s: %w: %s: %v", id, &exechost.PolicyError{
					Field: exechost.PolicyFieldCheckpointWorkspace, Reason: "workspace entry refused"}, p, err)
			}
		}
		if exechost.ContainsAny(p, req.Redact) && !e.inherited[p] {
			return nil, fmt.Errorf("checkpoint %s: %w: %w", id,
				&exechost.PolicyError{Field: exechost.PolicyFieldRedact, Reason: "workspace entry refused"}, exechost.ErrSecretName)
		}
		fl.Data = exechost.RedactBytes(fl.Data, req.Redact)
		files[p] = fl
	}
	size, sum := digestFiles(files)
	ck := &stored{
		meta: exechost.Checkpoint{
			CheckpointID: exechost.CheckpointID("ckpt-" + randomHex(16)),
			ExecutionID:  id,
			ImageDigest:  e.digest,
			SizeBytes:    size,
			SHA256:       sum,
			CreatedAt:    time.Now(),
		},
		res:   e.resources,
		files: files,
	}
	f.mu.Lock()
	f.checkpoints[ck.meta.CheckpointID] = ck
	f.mu.Unlock()
	meta := ck.meta
	return &meta, nil
}

// Restore implements exechost.ExecutionHost exactly as the Docker host
// does: a fully validated Provision whose workspace is the checkpoint, with
// the request's own image and resources (never the checkpoint's).
func (f *Fake) Restore(ctx context.Context, req exechost.RestoreRequest) (*exechost.Execution, error) {
	f.mu.Lock()
	_, ok := f.checkpoints[req.CheckpointID]
	f.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("restore %s: %w", req.CheckpointID, exechost.ErrNotFound)
	}
	p, err := exechost.RestoreProvision(req)
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", req.CheckpointID, err)
	}
	if p.ExecutionID == "" {
		p.ExecutionID = exechost.ExecutionID("restore-" + randomHex(12))
	}
	return f.Provision(ctx, p)
}

// TamperCheckpoint changes a stored checkpoint's files behind the Fake's
// back, as a writer to a checkpoint store could; the recorded digest is
// left alone, so the next Provision from it must fail.
func (f *Fake) TamperCheckpoint(id exechost.CheckpointID, tamper func(files map[string]File)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ck, ok := f.checkpoints[id]
	if !ok {
		return fmt.Errorf("checkpoint %s: %w", id, exechost.ErrNotFound)
	}
	tamper(ck.files)
	return nil
}

// Stats returns the counters.
func (f *Fake) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.stats
	s.Live = len(f.execs)
	s.Overlaps = int(f.overlaps.Load())
	return s
}

// Kill destroys id's sandbox behind the host's back (as docker kill
// would): a running Exec ends with ErrTerminated. Unknown IDs are a no-op.
func (f *Fake) Kill(id exechost.ExecutionID) {
	f.mu.Lock()
	e, ok := f.execs[id]
	f.mu.Unlock()
	if ok {
		f.end(e, false)
	}
}

// Live reports whether id is a live sandbox.
func (f *Fake) Live(id exechost.ExecutionID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.execs[id]
	return ok
}

// Files returns a copy of a live sandbox's workspace.
func (f *Fake) Files(id exechost.ExecutionID) (map[string]File, error) {
	f.mu.Lock()
	e, ok := f.execs[id]
	f.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("files %s: %w", id, exechost.ErrNotFound)
	}
	return e.ws.snapshot()
}

// CheckpointFiles returns a copy of a checkpoint's files.
func (f *Fake) CheckpointFiles(id exechost.CheckpointID) (map[string]File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ck, ok := f.checkpoints[id]
	if !ok {
		return nil, fmt.Errorf("checkpoint %s: %w", id, exechost.ErrNotFound)
	}
	out := make(map[string]File, len(ck.files))
	for p, fl := range ck.files {
		out[p] = copyFile(fl)
	}
	return out, nil
}

// Labels returns a live sandbox's labels.
func (f *Fake) Labels(id exechost.ExecutionID) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.execs[id]; ok {
		return maps.Clone(e.labels)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
