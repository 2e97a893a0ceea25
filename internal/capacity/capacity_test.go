package capacity

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	cpu = 1_000_000_000
	mib = 1 << 20
)

func pool(t *testing.T, cpus int64, slots int) *Pool {
	t.Helper()
	p, err := New(Size{NanoCPUs: cpus * cpu, MemoryBytes: cpus * 1024 * mib}, slots, nil)
	require.NoError(t, err)
	return p
}

func cpus(n float64) Size { return Size{NanoCPUs: int64(n * cpu), MemoryBytes: int64(n * 1024 * mib)} }

// returns runs f and is closed when it has returned.
func returns(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() { f(); close(done) }()
	return done
}

// stillRunning fails the test when done closes within a moment: f is
// meant to be waiting. (Only "still waiting after 100 ms" is asserted;
// the other outcome is asserted by waiting for done.)
func stillRunning(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
		t.Fatal(what)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestNew(t *testing.T) {
	p := pool(t, 2, 4)
	require.Equal(t, cpus(0.5), p.Share())
	_, err := New(Size{NanoCPUs: 1, MemoryBytes: 1}, 4, nil)
	require.ErrorContains(t, err, "too small")
	_, err = New(cpus(1), 0, nil)
	require.Error(t, err)
}

func TestSuppliersBoundSlotsAndStopPollingWhenFull(t *testing.T) {
	p := pool(t, 2, 4)
	main, gpu := p.Supplier(3), p.Supplier(1)
	for range 3 {
		require.NotNil(t, main.TryReserveSlot(nil))
	}
	require.Nil(t, main.TryReserveSlot(nil), "the supplier's own maximum")
	require.NotNil(t, gpu.TryReserveSlot(nil))
	gpu.ReleaseSlot(nil)

	// Slots hold no budget; running steps do. With 1.75 CPUs charged,
	// less than a share (0.5) is free: no slot until a step ends.
	l, err := p.Charge(t.Context(), cpus(1.75))
	require.NoError(t, err)
	require.Nil(t, gpu.TryReserveSlot(nil), "full: no more polling")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = gpu.ReserveSlot(ctx, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	done := returns(func() {
		_, err := gpu.ReserveSlot(t.Context(), nil)
		require.NoError(t, err)
	})
	stillRunning(t, done, "a slot was handed out with no room")
	l.Release()
	<-done
}

func TestAStepWaitsForRoomAndHoldsBackNewSlots(t *testing.T) {
	p := pool(t, 2, 4)
	s := p.Supplier(4)
	r1, err := p.Charge(t.Context(), cpus(1))
	require.NoError(t, err)
	r2, err := p.Charge(t.Context(), cpus(0.5))
	require.NoError(t, err)
	var r3 Lease
	done := returns(func() {
		var err error
		r3, err = p.Charge(t.Context(), cpus(1))
		require.NoError(t, err)
	})
	stillRunning(t, done, "a 1-CPU step started with 0.5 CPU free")
	require.Nil(t, s.TryReserveSlot(nil), "no new slot while a step waits for room, though a share is free")
	r2.Release()
	<-done
	require.Equal(t, cpus(2), p.InUse())
	r1.Release()
	r3.Release()
	r3.Release() // twice is once
	require.Equal(t, Size{}, p.InUse())
	require.NotNil(t, s.TryReserveSlot(nil))
}

// Steps as large as the whole budget run one at a time, never at once,
// and never wait for each other forever.
func TestWholeBudgetStepsRunOneAtATime(t *testing.T) {
	p := pool(t, 2, 4)
	var mu sync.Mutex
	running, peak := 0, 0
	step := func() {
		l, err := p.Charge(t.Context(), cpus(2))
		require.NoError(t, err)
		mu.Lock()
		running++
		peak = max(peak, running)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		l.Release()
	}
	var all []<-chan struct{}
	for range 3 {
		all = append(all, returns(step))
	}
	for _, d := range all {
		select {
		case <-d:
		case <-time.After(10 * time.Second):
			t.Fatal("a step never got the budget")
		}
	}
	require.Equal(t, 1, peak)
	require.Equal(t, Size{}, p.InUse())
}

func TestTooLargeAndCanceled(t *testing.T) {
	p := pool(t, 2, 4)
	s := p.Supplier(4)
	_, err := p.Charge(t.Context(), Size{NanoCPUs: 3 * cpu, MemoryBytes: mib})
	var tl *TooLargeError
	require.ErrorAs(t, err, &tl)
	require.Contains(t, err.Error(), "3.00 CPU")

	l, err := p.Charge(t.Context(), cpus(2))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = p.Charge(ctx, cpus(1))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	l.Release()
	require.Equal(t, Size{}, p.InUse())
	require.NotNil(t, s.TryReserveSlot(nil), "a canceled wait no longer holds back new slots")
}
