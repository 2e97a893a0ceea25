package devserver

import "syscall"

// sysProcAttr puts the server in its own process group, so a terminal's
// Ctrl-C reaches agentctl only (which stops the worker first, then the
// server), and makes the kernel SIGTERM the server if agentctl dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
