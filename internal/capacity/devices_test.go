package capacity

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// gpuPool is a pool of devices only (CPU and memory unbounded), as a
// worker with --gpus and no CPU/memory budget has.
func gpuPool(t *testing.T, slots int, devices ...string) *Pool {
	t.Helper()
	p, err := New(Size{NanoCPUs: Unbounded, MemoryBytes: Unbounded}, slots, devices)
	require.NoError(t, err)
	return p
}

func gpuStep(k int) Size { return Size{NanoCPUs: cpu, MemoryBytes: 512 * mib, GPUs: k} }

func TestChargeDevices(t *testing.T) {
	tests := []struct {
		name    string
		devices []string
		held    []int // GPUs of steps charged first, and kept
		release []int // indexes into held released before next
		next    int   // GPUs of the step charged last
		want    []string
		waits   bool // next cannot get its devices while held
		tooMany bool // next can never run here
	}{
		{name: "one of two", devices: []string{"0", "1"}, next: 1, want: []string{"0"}},
		{name: "second gets the other device", devices: []string{"0", "1"}, held: []int{1}, next: 1, want: []string{"1"}},
		{name: "two of two", devices: []string{"0", "1"}, next: 2, want: []string{"0", "1"}},
		{name: "k of n, lowest free first", devices: []string{"a", "b", "c", "d"}, held: []int{1, 2}, next: 1, want: []string{"d"}},
		{name: "a released device is reused", devices: []string{"0", "1", "2"}, held: []int{1, 1, 1}, release: []int{1}, next: 1, want: []string{"1"}},
		{name: "released devices in pool order", devices: []string{"0", "1", "2", "3"}, held: []int{1, 2, 1}, release: []int{2, 0}, next: 2, want: []string{"0", "3"}},
		{name: "all is every device", devices: []string{"GPU-x", "GPU-y"}, next: -1, want: []string{"GPU-x", "GPU-y"}},
		{name: "exhausted: waits", devices: []string{"0", "1"}, held: []int{1, 1}, next: 1, waits: true},
		{name: "two while one is held: waits", devices: []string{"0", "1"}, held: []int{1}, next: 2, waits: true},
		{name: "all while one is held: waits", devices: []string{"0", "1"}, held: []int{1}, next: -1, waits: true},
		{name: "more than the worker has", devices: []string{"0", "1"}, next: 3, tooMany: true},
		{name: "more than the worker has, even when idle", devices: []string{"0"}, next: 2, tooMany: true},
		{name: "a pool without devices pins none", devices: nil, held: []int{1, 1}, next: 4, want: nil},
		{name: "no GPUs, no devices", devices: []string{"0"}, held: []int{1}, next: 0, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := gpuPool(t, 8, tt.devices...)
			var leases []Lease
			for _, k := range tt.held {
				l, err := p.Charge(t.Context(), gpuStep(k))
				require.NoError(t, err)
				leases = append(leases, l)
			}
			for _, i := range tt.release {
				leases[i].Release()
			}
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			l, err := p.Charge(ctx, gpuStep(tt.next))
			switch {
			case tt.tooMany:
				var tl *TooLargeError
				require.ErrorAs(t, err, &tl)
				require.True(t, tl.TooManyGPUs())
				require.Equal(t, fmt.Sprintf("the step needs %d GPUs, more than this worker has (%s)", tt.next, gpus(len(tt.devices))), err.Error())
			case tt.waits:
				require.ErrorIs(t, err, context.DeadlineExceeded)
			default:
				require.NoError(t, err)
				require.Equal(t, tt.want, l.Devices)
				l.Release()
			}
			for _, l := range leases {
				l.Release()
			}
			require.Equal(t, Size{}, p.InUse(), "everything given back")
		})
	}
}

func TestNewDevices(t *testing.T) {
	_, err := New(Size{NanoCPUs: Unbounded, MemoryBytes: Unbounded}, 2, []string{"0", "0"})
	require.ErrorContains(t, err, "listed twice")
	_, err = New(Size{NanoCPUs: Unbounded, MemoryBytes: Unbounded}, 2, []string{""})
	require.Error(t, err)

	p := gpuPool(t, 1, "0", "1")
	require.Equal(t, Size{NanoCPUs: Unbounded, MemoryBytes: Unbounded, GPUs: 2}, p.Budget(), "the devices are the GPU budget")
	require.Equal(t, Size{GPUs: 1}, p.Share(), "an unbounded dimension asks nothing of a slot")
	require.Equal(t, "any CPU, any memory, 2 GPUs", p.Budget().String())
	// One slot, unbounded CPU: a running step never keeps the slot from
	// being handed out again (the share of an unbounded dimension is 0).
	l, err := p.Charge(t.Context(), gpuStep(1))
	require.NoError(t, err)
	require.NotNil(t, p.GPUSupplier(1).TryReserveSlot(nil))
	l.Release()
}

// The GPU queue's supplier polls only while a device is free and no GPU
// step waits for devices; the other queue's is not held back by a step
// that waits for devices, only by one that waits for CPU or memory.
func TestGPUSupplierPollsOnlyWithAFreeDevice(t *testing.T) {
	p, err := New(Size{NanoCPUs: 4 * cpu, MemoryBytes: Unbounded}, 8, []string{"0", "1"})
	require.NoError(t, err)
	main, gpu := p.Supplier(4), p.GPUSupplier(2)
	slot := func(s *Supplier) bool {
		if s.TryReserveSlot(nil) == nil {
			return false
		}
		s.ReleaseSlot(nil)
		return true
	}

	a, err := p.Charge(t.Context(), gpuStep(1))
	require.NoError(t, err)
	require.True(t, slot(gpu), "one device free")
	b, err := p.Charge(t.Context(), gpuStep(1))
	require.NoError(t, err)
	require.False(t, slot(gpu), "every device held: the GPU queue stops polling")
	require.True(t, slot(main), "CPU steps still poll")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = gpu.ReserveSlot(ctx, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// A two-GPU step waits for both devices.
	b.Release()
	var c Lease
	done := returns(func() {
		var err error
		c, err = p.Charge(t.Context(), gpuStep(2))
		require.NoError(t, err)
	})
	stillRunning(t, done, "a two-GPU step started with one device free")
	require.False(t, slot(gpu), "a device is free, but a GPU step waits for devices")
	require.True(t, slot(main), "a step waiting for devices does not hold back CPU steps")
	a.Release()
	<-done
	require.Equal(t, []string{"0", "1"}, c.Devices)
	require.False(t, slot(gpu))

	// A step waiting for CPU holds back both queues.
	big := returns(func() {
		l, err := p.Charge(t.Context(), Size{NanoCPUs: 3*cpu + cpu/2, MemoryBytes: mib})
		require.NoError(t, err)
		l.Release()
	})
	stillRunning(t, big, "a 3.5-CPU step started with 3 CPUs free")
	require.False(t, slot(main), "a step waits for CPU")
	c.Release()
	<-big
	require.True(t, slot(main))
	require.True(t, slot(gpu))
	require.Equal(t, Size{}, p.InUse())
}

// CPU and devices are taken together: a GPU step that waits for CPU holds
// no device meanwhile.
func TestChargeTakesCPUAndDevicesTogether(t *testing.T) {
	p, err := New(Size{NanoCPUs: 2 * cpu, MemoryBytes: Unbounded}, 4, []string{"0", "1"})
	require.NoError(t, err)
	cpuHog, err := p.Charge(t.Context(), Size{NanoCPUs: 2 * cpu, MemoryBytes: mib})
	require.NoError(t, err)
	var g Lease
	done := returns(func() {
		var err error
		g, err = p.Charge(t.Context(), gpuStep(1))
		require.NoError(t, err)
	})
	stillRunning(t, done, "a GPU step started without CPU")
	require.Zero(t, p.InUse().GPUs, "no device held while waiting for CPU")
	cpuHog.Release()
	<-done
	require.Equal(t, []string{"0"}, g.Devices)
	g.Release()
}

func TestCanceledWaitForDevices(t *testing.T) {
	p := gpuPool(t, 4, "0", "1")
	gpu := p.GPUSupplier(4)
	a, err := p.Charge(t.Context(), gpuStep(1))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = p.Charge(ctx, gpuStep(2))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotNil(t, gpu.TryReserveSlot(nil), "a canceled wait no longer holds back GPU slots")
	a.Release()
	a.Release() // twice is once
	require.Equal(t, Size{}, p.InUse())
}

// Many steps of random sizes at once (run with -race): a device is never
// held by two steps, no step gets fewer or more than it asked for, and
// everything is given back.
func TestDevicesConcurrent(t *testing.T) {
	devices := []string{"0", "1", "2", "3"}
	p := gpuPool(t, 16, devices...)
	var mu sync.Mutex
	holder := map[string]int{}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			k := 1 + rand.IntN(len(devices))
			if i%8 == 0 {
				k = -1
			}
			l, err := p.Charge(t.Context(), gpuStep(k))
			if err != nil {
				t.Error(err)
				return
			}
			want := k
			if k < 0 {
				want = len(devices)
			}
			mu.Lock()
			if len(l.Devices) != want {
				t.Errorf("step %d asked for %d devices, got %v", i, want, l.Devices)
			}
			for _, d := range l.Devices {
				if h, busy := holder[d]; busy {
					t.Errorf("device %s given to step %d while step %d holds it", d, i, h)
				}
				holder[d] = i
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			for _, d := range l.Devices {
				delete(holder, d)
			}
			mu.Unlock()
			l.Release()
		})
	}
	wg.Wait()
	require.Equal(t, Size{}, p.InUse())
	require.Empty(t, holder)
}
