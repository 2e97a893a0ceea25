// Command probe is a hostile test tool: it tries kernel interfaces a
// sandboxed tool must not reach and reports, per attempt, what the kernel
// answered. It decides nothing itself; the integration tests hold the
// expectations (exechost/docker/kernel_integration_test.go).
//
//	probe syscalls   raw calls the seccomp profile refuses (io_uring, ptrace, unshare, …)
//	probe pid1       every way we know to stop, trace, or write PID 1 (the deadline keeper)
//	probe work       ordinary tool work that must keep working under the profile
//
// Output: one JSON object {"mode": …, "results": [{"name", "errno", "errnum", "detail"}]};
// errno "" means the call succeeded.
package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
)

//go:embed VERSION
var version string

type result struct {
	Name   string `json:"name"`
	Errno  string `json:"errno"`
	Errnum int    `json:"errnum"`
	Detail string `json:"detail,omitempty"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: probe syscalls|pid1|work|--version")
		os.Exit(2)
	}
	var rs []result
	switch os.Args[1] {
	case "--version":
		fmt.Println(strings.TrimSpace(version))
		return
	case "--help":
		fmt.Println("probe syscalls|pid1|work: try refused kernel interfaces and report errno per attempt")
		return
	case "syscalls":
		rs = syscalls()
	case "pid1":
		rs = pid1()
	case "work":
		rs = work()
	default:
		fmt.Fprintf(os.Stderr, "probe: unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string]any{"mode": os.Args[1], "results": rs}); err != nil {
		os.Exit(1)
	}
}

var errnoNames = map[syscall.Errno]string{
	syscall.EPERM: "EPERM", syscall.ENOENT: "ENOENT", syscall.ESRCH: "ESRCH", syscall.EBADF: "EBADF",
	syscall.EACCES: "EACCES", syscall.EFAULT: "EFAULT", syscall.EINVAL: "EINVAL", syscall.ENOSYS: "ENOSYS",
	syscall.EROFS: "EROFS", syscall.EAFNOSUPPORT: "EAFNOSUPPORT", syscall.ENOTDIR: "ENOTDIR",
	syscall.ETXTBSY: "ETXTBSY", syscall.EEXIST: "EEXIST", syscall.EOPNOTSUPP: "EOPNOTSUPP",
	syscall.ENOSPC: "ENOSPC", syscall.ENOMEM: "ENOMEM", syscall.EAGAIN: "EAGAIN",
}

func errResult(name string, err error) result {
	r := result{Name: name}
	if err == nil {
		return r
	}
	var e syscall.Errno
	if pe, ok := err.(*os.PathError); ok {
		err = pe.Err
	}
	if se, ok := err.(*os.SyscallError); ok {
		err = se.Err
	}
	if x, ok := err.(syscall.Errno); ok {
		e = x
	} else {
		r.Errno, r.Errnum, r.Detail = "OTHER", -1, err.Error()
		return r
	}
	r.Errnum = int(e)
	if n, ok := errnoNames[e]; ok {
		r.Errno = n
	} else {
		r.Errno = fmt.Sprintf("E%d", int(e))
	}
	return r
}

// sys performs one raw system call.
func sys(name string, trap uintptr, a ...uintptr) result {
	var args [6]uintptr
	copy(args[:], a)
	_, _, e := syscall.Syscall6(trap, args[0], args[1], args[2], args[3], args[4], args[5])
	if e == 0 {
		return result{Name: name}
	}
	return errResult(name, e)
}

// keep holds every buffer handed to a raw call: on the heap (Go never
// moves heap objects) and reachable until the probe exits.
var keep [][]byte

func buf(n int) uintptr {
	b := make([]byte, n)
	keep = append(keep, b)
	return uintptrOf(&b[0])
}

func cstr(s string) uintptr {
	b := append([]byte(s), 0)
	keep = append(keep, b)
	return uintptrOf(&b[0])
}
