package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

// escapeTargets are paths outside /workspace a tool must not be able to write.
var escapeTargets = []string{"/escape-test", "/etc/escape-test", "/tmp/escape-test", "/bin/escape-test"}

// probeAddr is in TEST-NET-1 (RFC 5737): reserved for documentation, routed
// nowhere. In a network-less sandbox the dial fails at once with "network is
// unreachable" and sends nothing.
const probeAddr = "192.0.2.1:80"

func modeEscape(ctx context.Context, _ toolkit.Env, in input) (any, error) {
	writes := map[string]any{}
	escaped := false
	for _, p := range escapeTargets {
		err := os.WriteFile(p, []byte("escaped"), 0o644)
		if err == nil {
			escaped = true
			_ = os.Remove(p)
			writes[p] = map[string]any{"written": true}
		} else {
			writes[p] = map[string]any{"written": false, "error": err.Error()}
		}
	}
	ifaces, _ := readFile("/proc/net/dev")
	names := ParseNetDev(ifaces)
	tcp := map[string]any{}
	if nonLoopback(names) {
		// Interfaces besides lo mean the sandbox has a network: that is the
		// finding. We do not send traffic to prove it further.
		tcp["connected"] = nil
		tcp["skipped"] = "non-loopback interfaces present: " + strings.Join(names, ",")
		escaped = true
	} else {
		target := in.Target
		if target == "" {
			target = probeAddr
		}
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", target)
		cancel()
		tcp["target"] = target
		tcp["connected"] = err == nil
		if err == nil {
			escaped = true
			_ = conn.Close()
		} else {
			tcp["error"] = err.Error()
		}
	}
	return map[string]any{"writes": writes, "tcp": tcp, "interfaces": names, "escaped": escaped}, nil
}

func nonLoopback(names []string) bool {
	for _, n := range names {
		if n != "lo" {
			return true
		}
	}
	return false
}

func readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}

func modeSelfInspect(_ context.Context, env toolkit.Env, _ input) (any, error) {
	out := map[string]any{
		"uid": os.Getuid(), "gid": os.Getgid(), "euid": os.Geteuid(), "egid": os.Getegid(),
	}
	if groups, err := os.Getgroups(); err == nil {
		out["groups"] = groups
	}
	if status, err := readFile("/proc/self/status"); err == nil {
		out["status"] = ParseStatus(status)
	} else {
		out["status_error"] = err.Error()
	}
	if dev, err := readFile("/proc/net/dev"); err == nil {
		out["interfaces"] = ParseNetDev(dev)
	}
	if mi, err := readFile("/proc/self/mountinfo"); err == nil {
		out["mounts"] = ParseMountinfo(mi, "/", env.Workspace, "/tmp", "/dev/shm")
	}
	if cwd, err := os.Getwd(); err == nil {
		out["cwd"] = cwd
	}
	if h, err := os.Hostname(); err == nil {
		out["hostname"] = h
	}
	out["env_names"] = EnvNames(os.Environ())
	out["readonly_root"] = !canWrite("/")
	out["workspace_writable"] = canWrite(env.Workspace)
	return out, nil
}

func canWrite(dir string) bool {
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return false
	}
	name := f.Name()
	_ = f.Close()
	_ = os.Remove(name)
	return true
}

// EnvNames returns the sorted names of KEY=VALUE entries; values are dropped
// so secrets handed to the tool never reach its output.
func EnvNames(environ []string) []string {
	names := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// ParseStatus picks the security-relevant fields of /proc/self/status.
func ParseStatus(s string) map[string]string {
	want := map[string]bool{"CapInh": true, "CapPrm": true, "CapEff": true, "CapBnd": true, "CapAmb": true, "NoNewPrivs": true, "Seccomp": true, "Uid": true, "Gid": true}
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && want[k] {
			out[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return out
}

// ParseNetDev returns the interface names listed in /proc/net/dev.
func ParseNetDev(s string) []string {
	names := []string{}
	for i, line := range strings.Split(s, "\n") {
		if i < 2 { // two header lines
			continue
		}
		name, _, ok := strings.Cut(line, ":")
		if ok {
			names = append(names, strings.TrimSpace(name))
		}
	}
	sort.Strings(names)
	return names
}

// Mount is one /proc/self/mountinfo entry.
type Mount struct {
	MountPoint   string   `json:"mount_point"`
	FSType       string   `json:"fstype"`
	Source       string   `json:"source"`
	Options      []string `json:"options"`       // per-mount: ro, nosuid, nodev, noexec, …
	SuperOptions []string `json:"super_options"` // per-filesystem: size=, mode=, uid=, …
}

// ParseMountinfo returns, for each wanted mount point, the last (topmost)
// entry mounted exactly there; fields per proc(5).
func ParseMountinfo(s string, points ...string) map[string]Mount {
	want := map[string]bool{}
	for _, p := range points {
		want[filepath.Clean(p)] = true
	}
	out := map[string]Mount{}
	for _, line := range strings.Split(s, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 6 || len(g) < 3 {
			continue
		}
		mp := unescapeOctal(f[4])
		if !want[mp] {
			continue
		}
		out[mp] = Mount{MountPoint: mp, FSType: g[0], Source: g[1], Options: strings.Split(f[5], ","), SuperOptions: strings.Split(g[2], ",")}
	}
	return out
}

// unescapeOctal undoes mountinfo's \040-style escaping of spaces and such.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
