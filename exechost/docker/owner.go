package docker

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// DefaultOwner names one Host in this process as
// "<hostname>:<pid>:<start-time>:<nonce>". The start time (clock ticks since
// boot, from /proc) tells a live process from a later one that reused its
// PID — workers in containers are often PID 1 on every start. The random
// nonce keeps two hosts in one process (tests, embedders) from treating each
// other's sandboxes as their own untracked leftovers.
func DefaultOwner() string {
	host, _ := os.Hostname()
	pid := os.Getpid()
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	return fmt.Sprintf("%s:%d:%s:%x", host, pid, procStart(pid), nonce)
}

// procStart reads field 22 of /proc/<pid>/stat, or "" if unavailable.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name (field 2) may contain spaces; fields after it are
	// split from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(string(b[i+1:]))
	const startField = 22 - 3 // fields[0] is field 3 (state)
	if len(fields) <= startField {
		return ""
	}
	return fields[startField]
}

// LocalOwnerAlive reports whether owner may still be running. Owners on
// another host cannot be checked from here and count as alive: their
// sandboxes are reaped by their deadline instead.
func LocalOwnerAlive(owner string) bool {
	host, rest, ok := strings.Cut(owner, ":")
	if !ok {
		return true // not our format: do not touch
	}
	me, _ := os.Hostname()
	if host != me {
		return true
	}
	pidStr, start, _ := strings.Cut(rest, ":")
	start, _, _ = strings.Cut(start, ":") // drop the per-host nonce
	pid, err := strconv.Atoi(pidStr)
	if err != nil || pid <= 0 {
		return true
	}
	cur := procStart(pid)
	if cur == "" {
		_, err := os.Stat("/proc/self/stat")
		return err != nil // no such process if /proc works at all
	}
	return start == "" || cur == start
}
