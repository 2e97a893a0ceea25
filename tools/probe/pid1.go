package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// pid1 tries every way we know for an unprivileged process to stop, trace,
// slow down or rewrite PID 1, the sandbox's deadline keeper. Each attempt
// that the kernel accepts is a hole; the test asserts there are none and
// that the keeper still runs afterwards.
func pid1() []result {
	var rs []result
	// Every standard and a few real-time signals, by three system calls.
	for sig := 1; sig <= 31; sig++ {
		rs = append(rs, sys(fmt.Sprintf("kill_%d", sig), sysKill, 1, uintptr(sig)))
	}
	for _, sig := range []int{34, 50, 64} {
		rs = append(rs, sys(fmt.Sprintf("kill_rt_%d", sig), sysKill, 1, uintptr(sig)))
	}
	for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGKILL} {
		rs = append(rs,
			sys("tkill_"+sigName(sig), sysTkill, 1, uintptr(sig)),
			sys("tgkill_"+sigName(sig), sysTgkill, 1, 1, uintptr(sig)),
			sys("rt_sigqueueinfo_"+sigName(sig), sysRtSigqueueinfo, 1, uintptr(sig), siginfo(sig)),
		)
	}
	rs = append(rs, pidfdSignal(syscall.SIGSTOP), pidfdSignal(syscall.SIGKILL))
	// Tracing and memory.
	rs = append(rs,
		sys("ptrace_attach", sysPtrace, ptraceAttach, 1, 0, 0),
		sys("ptrace_seize", sysPtrace, ptraceSeize, 1, 0, 0),
		sys("process_vm_readv", sysProcessVMReadv, 1, iovec(8), 1, iovec(8), 1, 0),
		sys("process_vm_writev", sysProcessVMWritev, 1, iovec(8), 1, iovec(8), 1, 0),
		sys("kcmp", sysKcmp, uintptr(os.Getpid()), 1, 0, 0, 0),
		sys("process_madvise", sysProcessMadvise, ^uintptr(0), iovec(8), 1, 0, 0),
	)
	for _, f := range []struct {
		path string
		flag int
	}{
		{"/proc/1/mem", os.O_RDWR}, {"/proc/1/mem", os.O_WRONLY}, {"/proc/1/mem", os.O_RDONLY},
		{"/proc/1/task/1/mem", os.O_RDWR}, {"/proc/1/environ", os.O_RDONLY}, {"/proc/1/fd/0", os.O_RDONLY},
		{"/proc/1/oom_score_adj", os.O_WRONLY}, {"/proc/1/comm", os.O_WRONLY}, {"/proc/1/timerslack_ns", os.O_WRONLY},
		{"/proc/1/coredump_filter", os.O_WRONLY}, {"/proc/1/clear_refs", os.O_WRONLY}, {"/proc/1/attr/current", os.O_WRONLY},
		{"/proc/1/uid_map", os.O_WRONLY}, {"/proc/1/setgroups", os.O_WRONLY}, {"/proc/1/exe", os.O_WRONLY},
		{"/proc/1/root/bin/sleep", os.O_WRONLY}, {"/proc/1/cwd/.probe", os.O_WRONLY | os.O_CREATE},
		{"/proc/1/sched", os.O_WRONLY}, {"/proc/1/autogroup", os.O_WRONLY}, {"/proc/1/loginuid", os.O_WRONLY},
	} {
		rs = append(rs, openAttempt(f.path, f.flag))
	}
	rs = append(rs, readdirAttempt("/proc/1/fd"), readdirAttempt("/proc/1/map_files"), readlinkAttempt("/proc/1/cwd"), readlinkAttempt("/proc/1/root"))
	// Scheduling and limits of PID 1.
	rs = append(rs,
		sys("setpriority_19", sysSetpriority, 0, 1, 19), // PRIO_PROCESS
		sys("sched_setaffinity", sysSchedSetaff, 1, 8, buf(8)),
		sys("sched_setscheduler_idle", sysSchedSetsched, 1, 5, buf(8)), // SCHED_IDLE
		sys("ioprio_set_idle", sysIoprioSet, 1, 1, 3<<13),              // IOPRIO_WHO_PROCESS, class IDLE
		sys("prlimit_cpu", sysPrlimit64, 1, 0, rlimitZero(), 0),        // RLIMIT_CPU = 0
		sys("migrate_pages", sysMigratePages, 1, 64, buf(8), buf(8)),
		sys("move_pages", sysMovePages, 1, 1, buf(8), 0, buf(8), 0),
	)
	// Last, signals to everything we may signal: PID 1 must not be among them.
	for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGTERM} {
		rs = append(rs, killAll(sig))
	}
	rs = append(rs, keeperState())
	return rs
}

func sigName(s syscall.Signal) string {
	if s == syscall.SIGSTOP {
		return "SIGSTOP"
	}
	return "SIGKILL"
}

// siginfo is a minimal siginfo_t (128 bytes) with si_code SI_QUEUE.
func siginfo(sig syscall.Signal) uintptr {
	b := make([]byte, 128)
	b[0] = byte(sig)
	b[8] = 0xff // si_code = -1 (SI_QUEUE), little endian int32
	b[9], b[10], b[11] = 0xff, 0xff, 0xff
	keep = append(keep, b)
	return uintptrOf(&b[0])
}

// iovec is one struct iovec pointing at a fresh n-byte buffer.
func iovec(n int) uintptr {
	data := buf(n)
	b := make([]byte, 16)
	for i := 0; i < 8; i++ {
		b[i] = byte(data >> (8 * i))
		b[8+i] = byte(uint64(n) >> (8 * i))
	}
	keep = append(keep, b)
	return uintptrOf(&b[0])
}

func rlimitZero() uintptr { return buf(16) }

func pidfdSignal(sig syscall.Signal) result {
	name := "pidfd_send_signal_" + sigName(sig)
	fd, _, e := syscall.Syscall(sysPidfdOpen, 1, 0, 0)
	if e != 0 {
		r := errResult(name, e)
		r.Detail = "pidfd_open refused"
		return r
	}
	defer syscall.Close(int(fd))
	return sys(name, sysPidfdSendSignal, fd, uintptr(sig), 0, 0)
}

func openAttempt(path string, flag int) result {
	name := "open_" + strings.TrimPrefix(path, "/proc/1/") + "_" + flagName(flag)
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return errResult(name, err)
	}
	defer f.Close()
	// Some /proc files are world-writable by mode and check on write: the
	// hole is a write (or read) that goes through, not the open.
	var n int
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		n, err = f.Write([]byte("0"))
	} else {
		n, err = f.Read(make([]byte, 64))
	}
	r := errResult(name, err)
	r.Detail = fmt.Sprintf("opened; %d bytes", n)
	return r
}

func flagName(flag int) string {
	switch {
	case flag&os.O_RDWR != 0:
		return "rw"
	case flag&os.O_WRONLY != 0:
		return "w"
	}
	return "r"
}

func readdirAttempt(path string) result {
	name := "readdir_" + strings.TrimPrefix(path, "/proc/1/")
	f, err := os.Open(path)
	if err != nil {
		return errResult(name, err)
	}
	defer f.Close()
	if _, err := f.Readdirnames(-1); err != nil {
		return errResult(name, err)
	}
	return result{Name: name, Detail: "listed"}
}

func readlinkAttempt(path string) result {
	name := "readlink_" + strings.TrimPrefix(path, "/proc/1/")
	target, err := os.Readlink(path)
	if err != nil {
		return errResult(name, err)
	}
	return result{Name: name, Detail: target}
}

func killAll(sig syscall.Signal) result {
	r := sys("kill_all_"+sigName2(sig), sysKill, ^uintptr(0), uintptr(sig))
	return r
}

func sigName2(s syscall.Signal) string {
	if s == syscall.SIGSTOP {
		return "SIGSTOP"
	}
	return "SIGTERM"
}

// keeperState reports PID 1's uid and scheduler state ("S" sleeping is
// right; "T" stopped or "t" traced is the attack having worked). errno is
// "" and Detail carries "state=S uid=65533" when /proc/1/status is readable.
func keeperState() result {
	b, err := os.ReadFile("/proc/1/status")
	if err != nil {
		return errResult("keeper_state", err)
	}
	var state, uid, tracer string
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		switch k {
		case "State":
			state = f[0]
		case "Uid":
			uid = f[0]
		case "TracerPid":
			tracer = f[0]
		}
	}
	return result{Name: "keeper_state", Detail: fmt.Sprintf("state=%s uid=%s tracer=%s", state, uid, tracer)}
}
