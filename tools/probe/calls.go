package main

import (
	"syscall"
)

const (
	cloneNewns   = 0x00020000
	cloneNewuser = 0x10000000
	cloneNewpid  = 0x20000000
	cloneNewnet  = 0x40000000
	afVsock      = 40
	ptraceAttach = 16
	ptraceSeize  = 0x4206
)

// Negative int arguments as the kernel reads them.
var (
	atFDCWD  = uintptr(^uint64(99)) // -100
	negFour  = uintptr(^uint64(3))  // KEY_SPEC_SESSION_KEYRING
	negThree = uintptr(^uint64(2))  // KEY_SPEC_PROCESS_KEYRING
)

// syscalls tries each call the profile refuses once, with arguments that
// would be harmless (or fail with another errno) if it were allowed.
func syscalls() []result {
	rs := []result{
		sys("io_uring_setup", sysIoUringSetup, 1, buf(120)),
		sys("io_uring_enter", sysIoUringEnter, ^uintptr(0), 1, 0, 0, 0, 0),
		sys("io_uring_register", sysIoUringRegister, ^uintptr(0), 0, 0, 0),
		sys("ptrace_attach_pid1", sysPtrace, ptraceAttach, 1, 0, 0),
		sys("ptrace_seize_pid1", sysPtrace, ptraceSeize, 1, 0, 0),
		sys("ptrace_traceme", sysPtrace, 0, 0, 0, 0),
		sys("process_vm_readv", sysProcessVMReadv, 1, 0, 0, 0, 0, 0),
		sys("process_vm_writev", sysProcessVMWritev, 1, 0, 0, 0, 0, 0),
		sys("userfaultfd", sysUserfaultfd, 0),
		sys("bpf", sysBpf, 0, buf(128), 128),
		sys("perf_event_open", sysPerfEventOpen, buf(128), 0, ^uintptr(0), ^uintptr(0), 0),
		sys("keyctl", sysKeyctl, 0, negFour, 0), // KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING
		sys("add_key", sysAddKey, cstr("user"), cstr("probe"), cstr("x"), 1, negThree),
		sys("request_key", sysRequestKey, cstr("user"), cstr("probe"), 0, 0),
		sys("unshare_user", sysUnshare, cloneNewuser),
		sys("unshare_mount", sysUnshare, cloneNewns),
		sys("unshare_net", sysUnshare, cloneNewnet),
		sys("unshare_none", sysUnshare, 0),
		cloneWith("clone_newuser", cloneNewuser|uintptr(syscall.SIGCHLD)),
		cloneWith("clone_newpid", cloneNewpid|uintptr(syscall.SIGCHLD)),
		cloneWith("clone_newns", cloneNewns|uintptr(syscall.SIGCHLD)),
		sys("clone3", sysClone3, buf(88), 88),
		sys("setns", sysSetns, ^uintptr(0), 0),
		sys("mount_tmpfs", sysMount, cstr("none"), cstr("/tmp"), cstr("tmpfs"), 0, 0),
		sys("mount_bind", sysMount, cstr("/"), cstr("/tmp"), 0, syscall.MS_BIND, 0),
		sys("umount2", sysUmount2, cstr("/tmp"), 2),
		sys("mount_setattr", sysMountSetattr, ^uintptr(0), cstr(""), 0, 0, 0),
		sys("fsopen", sysFsopen, cstr("tmpfs"), 0),
		sys("fsconfig", sysFsconfig, ^uintptr(0), 0, 0, 0, 0),
		sys("fsmount", sysFsmount, ^uintptr(0), 0, 0),
		sys("fspick", sysFspick, atFDCWD, cstr("/"), 0), // AT_FDCWD
		sys("move_mount", sysMoveMount, ^uintptr(0), cstr(""), ^uintptr(0), cstr(""), 0),
		sys("open_tree", sysOpenTree, atFDCWD, cstr("/"), 0),
		sys("pivot_root", sysPivotRoot, cstr("/tmp"), cstr("/tmp")),
		sys("chroot", sysChroot, cstr("/")),
		sys("listmount", sysListmount, buf(32), buf(64), 8, 0),
		sys("statmount", sysStatmount, buf(32), buf(512), 512, 0),
		sys("kexec_load", sysKexecLoad, 0, 0, 0, 0),
		sys("kexec_file_load", sysKexecFileLoad, ^uintptr(0), ^uintptr(0), 1, cstr(""), 0),
		sys("init_module", sysInitModule, buf(16), 16, cstr("")),
		sys("finit_module", sysFinitModule, ^uintptr(0), cstr(""), 0),
		sys("delete_module", sysDeleteModule, cstr("probe"), 0),
		sys("reboot", sysReboot, 0xfee1dead, 0x28121969, 0), // magic numbers, LINUX_REBOOT_CMD_CAD_OFF: harmless even if allowed
		sys("open_by_handle_at", sysOpenByHandleAt, atFDCWD, buf(136), 0),
		sys("name_to_handle_at", sysNameToHandleAt, atFDCWD, cstr("/"), buf(136), buf(8), 0),
		sys("socket_vsock", uintptr(syscall.SYS_SOCKET), afVsock, syscall.SOCK_STREAM, 0),
		sys("personality_addr_no_randomize", sysPersonality, 0x0040000),
		sys("personality_read_implies_exec", sysPersonality, 0x0400000),
		sys("kcmp", sysKcmp, 1, 1, 0, 0, 0),
		sys("pidfd_getfd", sysPidfdGetfd, ^uintptr(0), 0, 0),
	}
	return rs
}

// cloneWith calls clone(2) with flags and no new stack (fork semantics). If
// the kernel ever lets it through, the child leaves at once.
func cloneWith(name string, flags uintptr) result {
	r1, _, e := syscall.RawSyscall6(sysClone, flags, 0, 0, 0, 0, 0)
	if e == 0 && r1 == 0 {
		syscall.RawSyscall(sysExitGroup, 0, 0, 0)
	}
	if e == 0 {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(int(r1), &ws, 0, nil)
		return result{Name: name}
	}
	return errResult(name, e)
}
