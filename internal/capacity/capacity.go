// Package capacity keeps a worker within its CPU and memory budget: it
// counts what each running step's sandbox may use (its declared
// resources) and lets the worker ask Temporal for more work only while
// there is room, so the rest wait in Temporal (on the task queue, for any
// worker) instead of overcommitting this host.
//
// The Temporal SDK reserves an activity slot before it polls, so it cannot
// know the size of the step it will get. So there are two gates:
//
//   - a Supplier (the SDK's activity slot supplier) hands out a slot only
//     while a fair share of the budget (budget ÷ slots) is free and no
//     step is waiting for room: a full worker stops polling;
//   - a step, once it is known, charges its declared size (Charge) and
//     waits, heartbeating, until that fits; only steps that were already
//     being polled for when the budget filled can wait here.
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

// Size is an amount of CPU and memory.
type Size struct {
	NanoCPUs    int64
	MemoryBytes int64
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
	return c + ", " + m
}

func (s Size) fits(in Size) bool { return s.NanoCPUs <= in.NanoCPUs && s.MemoryBytes <= in.MemoryBytes }

func (s Size) plus(o Size) Size {
	return Size{NanoCPUs: s.NanoCPUs + o.NanoCPUs, MemoryBytes: s.MemoryBytes + o.MemoryBytes}
}

func (s Size) minus(o Size) Size {
	return Size{NanoCPUs: s.NanoCPUs - o.NanoCPUs, MemoryBytes: s.MemoryBytes - o.MemoryBytes}
}

// TooLargeError is a step larger than the whole budget: it can never run
// on this worker.
type TooLargeError struct{ Step, Budget Size }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the step needs %s, more than this worker's whole budget (%s)", e.Step, e.Budget)
}

// Pool is a worker's budget: what its running steps have charged, and
// the Suppliers that poll for more only while there is room.
type Pool struct {
	budget Size
	share  Size // budget ÷ slots: the room a slot needs to be handed out

	mu      sync.Mutex
	used    Size
	waiting int           // steps waiting in Charge
	changed chan struct{} // closed (and replaced) when room may have appeared
}

// New is a Pool of budget shared by at most slots steps at once (of all
// its Suppliers together).
func New(budget Size, slots int) (*Pool, error) {
	if slots < 1 {
		return nil, errors.New("capacity: at least one slot")
	}
	share := Size{NanoCPUs: budget.NanoCPUs / int64(slots), MemoryBytes: budget.MemoryBytes / int64(slots)}
	if share.NanoCPUs <= 0 || share.MemoryBytes <= 0 {
		return nil, fmt.Errorf("capacity: a budget of %s is too small for %d steps", budget, slots)
	}
	return &Pool{budget: budget, share: share, changed: make(chan struct{})}, nil
}

// Budget is the pool's budget; Share the room a slot needs.
func (p *Pool) Budget() Size { return p.budget }
func (p *Pool) Share() Size  { return p.share }

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
// fits, and returns the function that gives it back (call it when the
// sandbox is gone). A step larger than the whole budget is a
// *TooLargeError at once.
func (p *Pool) Charge(ctx context.Context, size Size) (release func(), err error) {
	if !size.fits(p.budget) {
		return nil, &TooLargeError{Step: size, Budget: p.budget}
	}
	p.mu.Lock()
	if !p.used.plus(size).fits(p.budget) {
		// While a step waits, no slot is handed out: the budget drains
		// towards it instead of to new, smaller steps.
		p.waiting++
		for !p.used.plus(size).fits(p.budget) {
			ch := p.changed
			p.mu.Unlock()
			select {
			case <-ctx.Done():
				p.mu.Lock()
				p.waiting--
				p.wake()
				p.mu.Unlock()
				return nil, ctx.Err()
			case <-ch:
			}
			p.mu.Lock()
		}
		p.waiting--
		p.wake()
	}
	p.used = p.used.plus(size)
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.used = p.used.minus(size)
			p.wake()
		})
	}, nil
}

// Supplier is the activity slot supplier of one SDK worker (one task
// queue) on a Pool: at most max slots, and none while the pool is full.
type Supplier struct {
	p      *Pool
	max    int
	issued int // under p.mu
}

var _ worker.SlotSupplier = (*Supplier)(nil)

// Supplier is a slot supplier of at most max slots on p.
func (p *Pool) Supplier(max int) *Supplier { return &Supplier{p: p, max: max} }

func (s *Supplier) tryReserve() bool {
	p := s.p
	if s.issued >= s.max || p.waiting > 0 || !p.used.plus(p.share).fits(p.budget) {
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
