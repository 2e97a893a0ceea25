package worker

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/agentflow/agentflow/internal/capacity"
)

// Budget values of Config.CPUBudget and Config.MemoryBudget.
const (
	// BudgetAuto detects the host's CPUs or memory.
	BudgetAuto = -1
	// A zero budget is no budget: only --max-concurrent-steps bounds steps.
)

// capacityPool is the worker's CPU and memory budget over slots steps and
// its GPU devices (internal/capacity), nil when neither budget is set and
// there are no devices to pin.
func capacityPool(cfg Config, slots int, devices []string) (*capacity.Pool, error) {
	if cfg.CPUBudget == 0 && cfg.MemoryBudget == 0 && len(devices) == 0 {
		return nil, nil
	}
	b := capacity.Size{NanoCPUs: cfg.CPUBudget, MemoryBytes: cfg.MemoryBudget}
	if b.NanoCPUs == BudgetAuto {
		b.NanoCPUs = int64(runtime.NumCPU()) * 1_000_000_000
	}
	if b.MemoryBytes == BudgetAuto {
		m, err := hostMemory("/proc/meminfo")
		if err != nil {
			return nil, fmt.Errorf("--memory-budget auto: %w", err)
		}
		b.MemoryBytes = m
	}
	if b.NanoCPUs == 0 {
		b.NanoCPUs = capacity.Unbounded
	}
	if b.MemoryBytes == 0 {
		b.MemoryBytes = capacity.Unbounded
	}
	return capacity.New(b, slots, devices)
}

// hostMemory reads MemTotal from a /proc/meminfo file.
func hostMemory(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil || kb <= 0 {
				return 0, fmt.Errorf("%s: bad MemTotal %q", path, fields[1])
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("%s: no MemTotal", path)
}

// withSlotSupplier makes s the supplier of o's activity slots (a capacity
// Supplier); the other kinds keep the SDK's default sizes.
func withSlotSupplier(o sdkworker.Options, s sdkworker.SlotSupplier) (sdkworker.Options, error) {
	const sdkDefault = 1000 // the SDK's default of workflow, local activity and Nexus slots
	fixed := func() sdkworker.SlotSupplier {
		f, _ := sdkworker.NewFixedSizeSlotSupplier(sdkDefault)
		return f
	}
	tuner, err := sdkworker.NewCompositeTuner(sdkworker.CompositeTunerOptions{
		WorkflowSlotSupplier:      fixed(),
		ActivitySlotSupplier:      s,
		LocalActivitySlotSupplier: fixed(),
		NexusSlotSupplier:         fixed(),
	})
	if err != nil {
		return o, err
	}
	o.MaxConcurrentActivityExecutionSize = 0 // the tuner's, not both
	o.Tuner = tuner
	return o, nil
}
