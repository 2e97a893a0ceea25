package main

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// work is what ordinary tools do; each must succeed under the profile.
func work() []result {
	rs := []result{}
	add := func(name string, err error) { rs = append(rs, errResult(name, err)) }

	add("write_workspace", os.WriteFile("/workspace/probe.txt", []byte("ok"), 0o600))
	_, err := os.ReadFile("/workspace/probe.txt")
	add("read_workspace", err)
	add("write_tmp", os.WriteFile("/tmp/probe.txt", []byte("ok"), 0o600))
	// fork+exec: the Go runtime tries clone3 first and falls back to clone.
	add("exec_sh", exec.Command("/bin/sh", "-c", "exit 0").Run())
	out, err := exec.Command("/bin/sh", "-c", "echo hi | tr a-z A-Z").Output()
	if err == nil && string(out) != "HI\n" {
		err = syscall.EINVAL
	}
	add("pipeline", err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); mu.Lock(); n++; mu.Unlock() }()
	}
	wg.Wait()
	add("threads", nil)
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
	}
	add("socketpair_unix", err)
	rs = append(rs, sys("personality_query", sysPersonality, 0xffffffff))
	rs = append(rs, sys("kill_self_0", sysKill, uintptr(os.Getpid()), 0))
	// A child of ours may be signalled: the kill path the runner relies on.
	c := exec.Command("/bin/sleep", "30")
	err = c.Start()
	if err == nil {
		err = c.Process.Signal(syscall.SIGTERM)
		_ = c.Wait()
	}
	add("signal_own_child", err)
	return rs
}
