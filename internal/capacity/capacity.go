// Package capacity keeps a worker within its CPU and memory budget and
// its GPU devices: it counts what each running step's sandbox may use (its
// declared resources), hands each GPU step specific devices for its
// sandbox's life, and lets the worker ask Temporal for more work only
// while there is room, so the rest wait in Temporal (on the task queue,
// for any worker) instead of overcommitting this host.
//
// The Temporal SDK reserves an activity slot before it polls, so it cannot
// know the size of the step it will get. So there are two gates:
//
//   - a Supplier (the SDK's activity slot supplier) hands out a slot only
//     while a fair share of the budget (budget ÷ slots) is free — and, for
//     the GPU task queue, a device — and no step is waiting for room it
//     needs: a full worker stops polling;
//   - a step, once it is known, charges its declared size (Charge) and
//     waits, heartbeating, until that fits; only steps that were already
//     being polled for when the budget filled can wait here. CPU, memory
//     and devices are taken together or not at all, so a waiting step
//     never holds one while it waits for another.
//
// Slots themselves hold no budget: a poller that waits a minute for a task
// never keeps a running step from the room it needs.
package capacity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"go.temporal.io/sdk/worker"
)

// Size is an amount of CPU, memory and GPU devices.
type Size struct {
	NanoCPUs    int64
	MemoryBytes int64
	// GPUs is a number of devices; in a step's size -1 is all of the
	// pool's (spec: gpu "all").
	GPUs int
}

// Unbounded is a dimension of a budget that does not bound (and cannot
// overflow a sum of steps).
const Unbounded = math.MaxInt64 / 4

func (s Size) String() string {
	c, m := fmt.Sprintf("%.2f CPU", float64(s.NanoCPUs)/1e9), fmt.Sprintf("%d MiB", s.MemoryBytes>>20)
	if s.NanoCPUs >= Unbounded {
		c = "any CPU"
	}
	if s.MemoryBytes >= Unbounded {
		m = "any memory"
	}
	out := c + ", " + m
	switch {
	case s.GPUs == 1:
		out += ", 1 GPU"
	case s.GPUs > 1:
		out += fmt.Sprintf(", %d GPUs", s.GPUs)
	}
	return out
}

// fitsCompute: CPU and memory only.
func (s Size) fitsCompute(in Size) bool {
	return s.NanoCPUs <= in.NanoCPUs && s.MemoryBytes <= in.MemoryBytes
}

func (s Size) fits(in Size) bool { return s.fitsCompute(in) && s.GPUs <= in.GPUs }

func (s Size) plus(o Size) Size {
	return Size{NanoCPUs: s.NanoCPUs + o.NanoCPUs, MemoryBytes: s.MemoryBytes + o.MemoryBytes, GPUs: s.GPUs + o.GPUs}
}

func (s Size) minus(o Size) Size {
	return Size{NanoCPUs: s.NanoCPUs - o.NanoCPUs, MemoryBytes: s.MemoryBytes - o.MemoryBytes, GPUs: s.GPUs - o.GPUs}
}

// TooLargeError is a step larger than the whole budget: it can never run
// on this worker.
type TooLargeError struct{ Step, Budget Size }

func (e *TooLargeError) Error() string {
	if e.TooManyGPUs() && e.Step.fitsCompute(e.Budget) {
		return fmt.Sprintf("the step needs %s, more than this worker has (%s)", gpus(e.Step.GPUs), gpus(e.Budget.GPUs))
	}
	return fmt.Sprintf("the step needs %s, more than this worker's whole budget (%s)", e.Step, e.Budget)
}

// TooManyGPUs reports that the step needs more devices than the worker
// has (whatever else it needs).
func (e *TooLargeError) TooManyGPUs() bool { return e.Step.GPUs > e.Budget.GPUs }

func gpus(n int) string {
	if n == 1 {
		return "1 GPU"
	}
	return fmt.Sprintf("%d GPUs", n)
}

// Lease is what Charge took for one step.
type Lease struct {
	// Devices are the step's GPU devices (IDs as the pool was given
	// them), in the pool's order; none for a step without GPUs or on a
	// pool without devices.
	Devices []string
	release func()
}

// Release gives the lease back; call it when the sandbox is gone. Once is
// enough; more calls do nothing.
func (l Lease) Release() {
	if l.release != nil {
		l.release()
	}
}

// Pool is a worker's budget: what its running steps have charged, the
// devices they hold, and the Suppliers that poll for more only while
// there is room.
type Pool struct {
	budget  Size // GPUs: len(devices)
	share   Size // budget ÷ slots: the room a slot needs to be handed out
	devices []string

	mu      sync.Mutex
	used    Size
	held    []bool             // held[i]: devices[i] belongs to a running step
	waiting map[*Size]struct{} // sizes of the steps waiting in Charge
	changed chan struct{}      // closed (and replaced) when room may have appeared
}

// New is a Pool of budget (its GPUs are ignored: they are devices) shared
// by at most slots steps at once (of all its Suppliers together), with
// devices, the IDs of the worker's GPUs (none: GPU steps get no devices
// from the pool and are not bounded by it).
func New(budget Size, slots int, devices []string) (*Pool, error) {
	if slots < 1 {
		return nil, errors.New("capacity: at least one slot")
	}
	seen := map[string]bool{}
	for _, d := range devices {
		if d == "" || seen[d] {
			return nil, fmt.Errorf("capacity: device %q empty or listed twice", d)
		}
		seen[d] = true
	}
	budget.GPUs = len(devices)
	share := Size{NanoCPUs: budget.NanoCPUs / int64(slots), MemoryBytes: budget.MemoryBytes / int64(slots)}
	// An unbounded dimension asks nothing of a slot: the sum of running
	// steps can never fill it.
	if budget.NanoCPUs >= Unbounded {
		share.NanoCPUs = 0
	}
	if budget.MemoryBytes >= Unbounded {
		share.MemoryBytes = 0
	}
	if budget.NanoCPUs < Unbounded && share.NanoCPUs <= 0 || budget.MemoryBytes < Unbounded && share.MemoryBytes <= 0 {
		return nil, fmt.Errorf("capacity: a budget of %s is too small for %d steps", budget, slots)
	}
	if len(devices) > 0 {
		share.GPUs = 1 // a GPU step needs at least one
	}
	return &Pool{
		budget: budget, share: share,
		devices: append([]string(nil), devices...), held: make([]bool, len(devices)),
		waiting: map[*Size]struct{}{}, changed: make(chan struct{}),
	}, nil
}

// Budget is the pool's budget; Share the room a slot needs.
func (p *Pool) Budget() Size { return p.budget }
func (p *Pool) Share() Size  { return p.share }

// Devices are the pool's GPU devices.
func (p *Pool) Devices() []string { return append([]string(nil), p.devices...) }

// InUse is what running steps have charged.
func (p *Pool) InUse() Size {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// wake tells every waiter to look again; call with mu held.
func (p *Pool) wake() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Charge takes size from the budget for a running step, waiting until it
// fits, and returns the lease, with the step's devices, that gives it back
// (release it when the sandbox is gone). A step larger than the whole
// budget, or needing more devices than the pool has, is a
// *TooLargeError at once. On a pool without devices a step's GPUs are
// not counted.
func (p *Pool) Charge(ctx context.Context, size Size) (Lease, error) {
	switch {
	case len(p.devices) == 0:
		size.GPUs = 0
	case size.GPUs < 0:
		size.GPUs = len(p.devices)
	}
	if !size.fits(p.budget) {
		return Lease{}, &TooLargeError{Step: size, Budget: p.budget}
	}
	p.mu.Lock()
	if !p.used.plus(size).fits(p.budget) {
		// While a step waits, the suppliers it needs hand out no slot: the
		// budget (or the devices) drain towards it instead of to new,
		// smaller steps.
		w := &size
		p.waiting[w] = struct{}{}
		for !p.used.plus(size).fits(p.budget) {
			ch := p.changed
			p.mu.Unlock()
			select {
			case <-ctx.Done():
				p.mu.Lock()
				delete(p.waiting, w)
				p.wake()
				p.mu.Unlock()
				return Lease{}, ctx.Err()
			case <-ch:
			}
			p.mu.Lock()
		}
		delete(p.waiting, w)
		p.wake()
	}
	p.used = p.used.plus(size)
	idx := p.take(size.GPUs)
	p.mu.Unlock()
	lease := Lease{}
	for _, i := range idx {
		lease.Devices = append(lease.Devices, p.devices[i])
	}
	var once sync.Once
	lease.release = func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.used = p.used.minus(size)
			for _, i := range idx {
				p.held[i] = false
			}
			p.wake()
		})
	}
	return lease, nil
}

// take marks n free devices held, lowest index first, and returns their
// indexes; call with mu held, after used made room for them.
func (p *Pool) take(n int) []int {
	var idx []int
	for i := 0; i < len(p.held) && len(idx) < n; i++ {
		if !p.held[i] {
			p.held[i] = true
			idx = append(idx, i)
		}
	}
	return idx
}

// heldBack reports whether a waiting step holds back new slots: every
// supplier's while it waits for CPU or memory, the GPU suppliers' (gpu)
// while it waits for devices. Call with mu held.
func (p *Pool) heldBack(gpu bool) bool {
	for w := range p.waiting {
		after := p.used.plus(*w)
		if !after.fitsCompute(p.budget) || gpu && after.GPUs > p.budget.GPUs {
			return true
		}
	}
	return false
}

// Supplier is the activity slot supplier of one SDK worker (one task
// queue) on a Pool: at most max slots, and none while the pool is full.
type Supplier struct {
	p      *Pool
	max    int
	gpu    bool // the GPU task queue's: a slot also needs a free device
	issued int  // under p.mu
}

var _ worker.SlotSupplier = (*Supplier)(nil)

// Supplier is a slot supplier of at most max slots on p.
func (p *Pool) Supplier(max int) *Supplier { return &Supplier{p: p, max: max} }

// GPUSupplier is the slot supplier of the GPU task queue: like Supplier,
// and on a pool with devices a slot is handed out only while one is free
// and no GPU step waits for devices, so GPU steps wait in Temporal while
// every device is held.
func (p *Pool) GPUSupplier(max int) *Supplier { return &Supplier{p: p, max: max, gpu: true} }

func (s *Supplier) tryReserve() bool {
	p := s.p
	need := p.share
	if !s.gpu {
		need.GPUs = 0
	}
	if s.issued >= s.max || p.heldBack(s.gpu) || !p.used.plus(need).fits(p.budget) {
		return false
	}
	s.issued++
	return true
}

// ReserveSlot implements worker.SlotSupplier: it blocks while the pool has
// no room for another step.
func (s *Supplier) ReserveSlot(ctx context.Context, _ worker.SlotReservationInfo) (*worker.SlotPermit, error) {
	for {
		s.p.mu.Lock()
		if s.tryReserve() {
			s.p.mu.Unlock()
			return &worker.SlotPermit{}, nil
		}
		ch := s.p.changed
		s.p.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}

// TryReserveSlot implements worker.SlotSupplier (eager activities).
func (s *Supplier) TryReserveSlot(worker.SlotReservationInfo) *worker.SlotPermit {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.tryReserve() {
		return &worker.SlotPermit{}
	}
	return nil
}

// MarkSlotUsed implements worker.SlotSupplier.
func (s *Supplier) MarkSlotUsed(worker.SlotMarkUsedInfo) {}

// ReleaseSlot implements worker.SlotSupplier.
func (s *Supplier) ReleaseSlot(worker.SlotReleaseInfo) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.issued--
	s.p.wake()
}

// MaxSlots implements worker.SlotSupplier.
func (s *Supplier) MaxSlots() int { return s.max }
