//go:build integration

package docker_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/errdefs"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/exechost/docker/policy"
	"github.com/agentflow/agentflow/exechost/docker/runner"
	"github.com/agentflow/agentflow/exechost/docker/workspace"
)

// kv parses "key=value" lines.
func kv(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

func TestSandboxIsHardened(t *testing.T) {
	e := setup(t)
	x, _ := e.provision(t, func(r *exechost.ProvisionRequest) {
		r.Resources.DiskBytes = 24 << 20
		r.Env = map[string]string{"LOG_LEVEL": "debug"}
	})
	res, err := e.host.Exec(t.Context(), x.ExecutionID, exechost.ExecRequest{
		Command: []string{"/bin/sh", "-c", `
echo uid=$(id -u)
echo gid=$(id -g)
grep -E '^(CapEff|CapBnd|CapPrm|CapAmb|NoNewPrivs):' /proc/self/status | sed 's/:\s*/=/'
echo ifaces=$(ls /sys/class/net | tr '\n' ' ')
echo netdev=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')
touch /rootfs-write 2>/dev/null && echo rootfs=writable || echo rootfs=readonly
touch /etc/x 2>/dev/null && echo etc=writable || echo etc=readonly
echo rootmount=$(awk '$2=="/"{print $4}' /proc/mounts)
echo wsmount=$(awk '$2=="/workspace"{print $1","$3","$4}' /proc/mounts)
echo tmpmount=$(awk '$2=="/tmp"{print $1","$3","$4}' /proc/mounts)
echo shm=$(awk '$2=="/dev/shm"{print $4}' /proc/mounts)
echo cwd=$(pwd)
echo tmpwrite=$(echo x > /tmp/f && echo ok)
printf '#!/bin/sh\necho ran\n' > /workspace/built.sh && chmod +x /workspace/built.sh && echo wsexec=$(/workspace/built.sh)
cp /workspace/built.sh /tmp/built.sh; /tmp/built.sh >/dev/null 2>&1 && echo tmpexec=yes || echo tmpexec=no
echo plain=$LOG_LEVEL
echo secret=$API_TOKEN
`},
		Env:     map[string]string{"STEP": "1"},
		Secrets: map[string]string{"API_TOKEN": "s3cr3t-value"},
	})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	got := kv(string(res.Stdout))
	require.Equal(t, "65532", got["uid"])
	require.Equal(t, "65532", got["gid"])
	for _, k := range []string{"CapEff", "CapBnd", "CapPrm"} {
		require.Equal(t, "0000000000000000", got[k], k)
	}
	if gVisor() {
		// gVisor's /proc/self/status has neither line (docs/security/gvisor.md);
		// no_new_privs and the empty ambient set still hold in the Sentry.
		require.NotContains(t, got, "NoNewPrivs", "gVisor: no NoNewPrivs line expected")
		require.NotContains(t, got, "CapAmb", "gVisor: no CapAmb line expected")
	} else {
		require.Equal(t, "0000000000000000", got["CapAmb"], "CapAmb")
		require.Equal(t, "1", got["NoNewPrivs"])
	}
	require.Equal(t, "lo", got["ifaces"])
	require.Equal(t, "lo", got["netdev"])
	require.Equal(t, "readonly", got["rootfs"])
	require.Equal(t, "readonly", got["etc"])
	require.True(t, strings.HasPrefix(got["rootmount"], "ro"), got["rootmount"])
	// /proc/mounts: the host kernel names the tmpfs source "tmpfs" and
	// prints sizes in KiB; gVisor's names it "none" and keeps the sizes in
	// bytes as Docker passed them (docs/security/gvisor.md).
	tmpfsPrefix, wsSize, shmSize := "tmpfs,tmpfs,rw", "size=24576k", "size=1024k"
	if gVisor() {
		tmpfsPrefix, wsSize, shmSize = "none,tmpfs,rw", "size=25165824", "size=1048576"
	}
	require.Contains(t, got["wsmount"], tmpfsPrefix)
	require.Contains(t, got["wsmount"], wsSize)
	require.Contains(t, got["wsmount"], "uid=65532,gid=65532")
	require.NotContains(t, got["wsmount"], "noexec")
	require.Contains(t, got["tmpmount"], tmpfsPrefix)
	require.Contains(t, got["tmpmount"], "noexec")
	require.Contains(t, got["shm"], shmSize)
	require.Equal(t, "/workspace", got["cwd"])
	require.Equal(t, "ok", got["tmpwrite"])
	require.Equal(t, "ran", got["wsexec"])
	require.Equal(t, "no", got["tmpexec"])
	require.Equal(t, "debug", got["plain"])
	require.Equal(t, "s3cr3t-value", got["secret"], "secrets reach the process")

	// ...but never the container's configuration.
	list := e.containersOf(t, x.ExecutionID)
	require.Len(t, list, 1)
	ins, err := e.c.ContainerInspect(t.Context(), list[0].ID)
	require.NoError(t, err)
	require.NotContains(t, fmt.Sprint(ins.Config.Env, ins.Config.Labels, ins.Config.Cmd, ins.Config.Entrypoint), "s3cr3t")
	require.Equal(t, policy.KeeperUser, ins.Config.User, "PID 1 is the keeper; execs run as the tool user")
	require.Equal(t, "/workspace", ins.Config.WorkingDir)
	require.True(t, ins.HostConfig.ReadonlyRootfs)
	require.Equal(t, ins.HostConfig.Memory, ins.HostConfig.MemorySwap)
	require.Equal(t, "true", ins.Config.Labels[policy.LabelManaged])
	require.Equal(t, string(x.ExecutionID), ins.Config.Labels[policy.LabelExecution])
	require.Equal(t, e.host.Owner(), ins.Config.Labels[policy.LabelOwner])
	require.Equal(t, strconv.FormatInt(x.Deadline.Unix(), 10), ins.Config.Labels[policy.LabelDeadline])
	require.Equal(t, e.base, x.ImageDigest)
}

func TestForkBombStoppedByPidsLimit(t *testing.T) {
	e := setup(t)
	x, _ := e.provision(t, func(r *exechost.ProvisionRequest) { r.Resources.Pids = 32 })
	res, err := e.host.Exec(t.Context(), x.ExecutionID, exechost.ExecRequest{
		Command: []string{"/bin/sh", "-c", `i=0; while [ $i -lt 200 ]; do sleep 600 & i=$((i+1)); done; echo spawned`},
		Timeout: 30 * time.Second,
	})
	if gVisor() && err != nil {
		// Under gVisor the pids cgroup holds the Sentry: when the bomb
		// exhausts it the whole sandbox ends (docs/security/gvisor.md).
		require.ErrorIs(t, err, exechost.ErrTerminated, "gVisor: the bomb ends the sandbox")
		e.requireGone(t, x.ExecutionID)
		return
	}
	if gVisor() && strings.Contains(string(res.Stderr), `urpc method "containerManager.WaitPID" failed`) {
		// The same end, seen from inside the exec: runsc reports that the
		// sandbox it was waiting on is gone. Contained either way; the
		// sandbox goes with Terminate.
		require.NoError(t, e.host.Terminate(t.Context(), x.ExecutionID))
		e.requireGone(t, x.ExecutionID)
		return
	}
	require.NoError(t, err)
	require.Contains(t, string(res.Stderr), "fork", "the shell could not fork past the limit")
	if gVisor() {
		return // the Sentry's threads share the cgroup: the counts below are runc's
	}

	list := e.containersOf(t, x.ExecutionID)
	require.Len(t, list, 1)
	stats, err := e.c.ContainerStatsOneShot(t.Context(), list[0].ID)
	require.NoError(t, err)
	defer stats.Body.Close()
	var s container.StatsResponse
	require.NoError(t, jsonDecode(stats.Body, &s))
	require.EqualValues(t, 32, s.PidsStats.Limit)
	require.LessOrEqual(t, s.PidsStats.Current, uint64(32))
	require.Greater(t, s.PidsStats.Current, uint64(20), "the bomb filled the pids budget")
}

func TestDiskFillStoppedAtTmpfsSize(t *testing.T) {
	e := setup(t)
	x, _ := e.provision(t, func(r *exechost.ProvisionRequest) { r.Resources.DiskBytes = 8 << 20 })
	res := e.sh(t, x.ExecutionID, `dd if=/dev/zero of=/workspace/fill bs=1M count=64 2>&1; echo rc=$?; echo size=$(wc -c < /workspace/fill)`)
	got := kv(string(res.Stdout))
	require.NotEqual(t, "0", got["rc"])
	require.Contains(t, string(res.Stdout), "No space left")
	size, err := strconv.ParseInt(got["size"], 10, 64)
	require.NoError(t, err)
	require.LessOrEqual(t, size, int64(8<<20))
	require.Greater(t, size, int64(7<<20))
}

func TestMemoryHogKilled(t *testing.T) {
	e := setup(t)
	x, _ := e.provision(t, func(r *exechost.ProvisionRequest) { r.Resources.MemoryBytes = 32 << 20 })
	res, err := e.host.Exec(t.Context(), x.ExecutionID, exechost.ExecRequest{
		Command: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=600M", "count=1"}, Timeout: 30 * time.Second,
	})
	if gVisor() {
		requireGVisorHogRefused(t, e, x.ExecutionID, res, err)
		return
	}
	require.NoError(t, err)
	require.Equal(t, 137, res.ExitCode)
	require.True(t, res.OOMKilled)

	// The sandbox survives its tool being OOM-killed, and a clean exit is not
	// reported as OOM.
	ok := e.sh(t, x.ExecutionID, "exit 0")
	require.False(t, ok.OOMKilled)
}

func TestOutputFloodCutAndContainerGone(t *testing.T) {
	e := setup(t)
	x, _ := e.provision(t, func(r *exechost.ProvisionRequest) { r.Resources.MaxOutputBytes = 64 << 10 })
	res, err := e.host.Exec(t.Context(), x.ExecutionID, exechost.ExecRequest{
		Command: []string{"/bin/sh", "-c", "yes 2>&1 & yes >&2"}, Timeout: 30 * time.Second,
	})
	require.ErrorIs(t, err, exechost.ErrOutputLimit)
	require.True(t, res.Truncated)
	require.LessOrEqual(t, len(res.Stdout)+len(res.Stderr), 64<<10)
	require.Greater(t, len(res.Stdout)+len(res.Stderr), 32<<10)
	e.requireGone(t, x.ExecutionID)

	_, err = e.host.Exec(t.Context(), x.ExecutionID, exechost.ExecRequest{Command: []string{"true"}})
	require.ErrorIs(t, err, exechost.ErrTerminated)
}

func TestDeadlineKillsToolAndContainer(t *testing.T) {
	e := setup(t)
	t.Run("exec timeout", func(t *testing.T) {
		x, _ := e.provision(t, nil)
		res, err := e.host.Exec(t.Context(), x.ExecutionID, exechost.ExecRequest{
			// trap '' TERM: the tool ignores SIGTERM, so removal must do it.
			Command: []string{"/bin/sh", "-c", "trap '' TERM; sleep 300; echo late"}, Timeout: time.Second,
		})
		require.ErrorIs(t, err, exechost.ErrTimeout)
		require.True(t, res.TimedOut)
		require.NotContains(t, string(res.Stdout), "late")
		e.requireGone(t, x.ExecutionID)
	})
	t.Run("sandbox runtime", func(t *testing.T) {
		// Long enough that a slow provision (runsc, a loaded machine) is
		// not mistaken for the deadline.
		x, _ := e.provision(t, func(r *exechost.ProvisionRequest) { r.Resources.Runtime = 6 * time.Second })
		_, err := e.host.Exec(t.Context(), x.ExecutionID, exechost.ExecRequest{Command: []string{"sleep", "300"}})
		require.ErrorIs(t, err, exechost.ErrTimeout)
		e.requireGone(t, x.ExecutionID)
	})
}

// hostProcesses counts host processes whose command line is exactly argv.
func hostProcesses(t *testing.T, argv ...string) int {
	t.Helper()
	want := strings.Join(argv, "\x00") + "\x00"
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	n := 0
	for _, d := range dirs {
		if b, err := os.ReadFile(d); err == nil && string(b) == want {
			n++
		}
	}
	return n
}

func TestBackgroundProcessDoesNotHangAndDiesWithSandbox(t *testing.T) {
	e := setup(t)
	x, _ := e.provision(t, nil)
	marker := strconv.Itoa(3000 + os.Getpid()%1000)
	res, err := e.host.Exec(t.Context(), x.ExecutionID, exechost.ExecRequest{
		// The background sleep inherits stdout and keeps it open.
		Command: []string{"/bin/sh", "-c", "sleep " + marker + " & echo started"}, Timeout: time.Minute,
	})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode)
	require.Equal(t, "started\n", string(res.Stdout))
	if _, err := os.Stat("/proc/1/cmdline"); err == nil && hostProcesses(t, "sleep", marker) == 0 {
		t.Log("cannot see sandbox processes from here; checking only that the container is gone")
	} else {
		require.Equal(t, 1, hostProcesses(t, "sleep", marker), "the background process outlived the tool")
	}
	require.NoError(t, e.host.Terminate(t.Context(), x.ExecutionID))
	e.requireGone(t, x.ExecutionID)
	require.Zero(t, hostProcesses(t, "sleep", marker), "the background process died with the sandbox")
}

func TestTerminateIsIdempotent(t *testing.T) {
	e := setup(t)
	x, _ := e.provision(t, nil)
	require.NoError(t, e.host.Terminate(t.Context(), x.ExecutionID))
	require.NoError(t, e.host.Terminate(t.Context(), x.ExecutionID))
	require.NoError(t, e.host.Terminate(t.Context(), "never-existed"))
	e.requireGone(t, x.ExecutionID)
	_, err := e.host.Exec(t.Context(), x.ExecutionID, exechost.ExecRequest{Command: []string{"true"}})
	require.ErrorIs(t, err, exechost.ErrTerminated)
	_, err = e.host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{})
	require.ErrorIs(t, err, exechost.ErrTerminated)
	_, err = e.host.Exec(t.Context(), "never-existed", exechost.ExecRequest{Command: []string{"true"}})
	require.ErrorIs(t, err, exechost.ErrNotFound)
}

func TestProvisionRefusesPolicyViolationsAndLeavesNothing(t *testing.T) {
	e := setup(t)
	tests := []struct {
		name   string
		mutate func(*exechost.ProvisionRequest)
		want   error
	}{
		{"mutable tag", func(r *exechost.ProvisionRequest) { r.Image = baseTag }, exechost.ErrPolicy},
		{"bridge network", func(r *exechost.ProvisionRequest) { r.Network = "bridge" }, exechost.ErrPolicy},
		{"secret env", func(r *exechost.ProvisionRequest) { r.Env = map[string]string{"GITHUB_TOKEN": "x"} }, exechost.ErrPolicy},
		{"missing limit", func(r *exechost.ProvisionRequest) { r.Resources.Pids = 0 }, exechost.ErrPolicy},
		{"unknown image", func(r *exechost.ProvisionRequest) { r.Image = "sha256:" + strings.Repeat("0", 64) }, exechost.ErrNotFound},
		{"unknown checkpoint", func(r *exechost.ProvisionRequest) { r.Workspace.Checkpoints = []exechost.CheckpointID{"ckpt-missing"} }, exechost.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := exechost.ProvisionRequest{ExecutionID: newID(t), Image: e.base, Resources: limits(), Labels: testLabels}
			tt.mutate(&req)
			_, err := e.host.Provision(t.Context(), req)
			require.ErrorIs(t, err, tt.want)
			e.requireGone(t, req.ExecutionID)
		})
	}
}

func TestCheckpointRestoreIntoDifferentImage(t *testing.T) {
	e := setup(t)
	other := e.secondImage(t)
	x, req := e.provision(t, nil)
	e.sh(t, x.ExecutionID, `set -e
mkdir -p d/sub
echo hello > d/f.txt && chmod 640 d/f.txt
printf '#!/bin/sh\necho run-ok\n' > run.sh && chmod 755 run.sh
ln -s d/f.txt link
ln -s ../run.sh d/up
echo secret > d/sub/private && chmod 600 d/sub/private
truncate -s 1000 d/sub/sparse 2>/dev/null || dd if=/dev/zero of=d/sub/sparse bs=1000 count=1 2>/dev/null
`)
	ck, err := e.host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{Reason: "handoff"})
	require.NoError(t, err)
	require.Equal(t, x.ExecutionID, ck.ExecutionID)
	require.Equal(t, e.base, ck.ImageDigest)
	require.Len(t, ck.SHA256, 64)
	m, err := e.store.Stat(t.Context(), ck.CheckpointID)
	require.NoError(t, err)
	require.Equal(t, checkpoint.SchemaVersion, m.SchemaVersion)
	require.Equal(t, req.Resources, m.Resources)
	require.Equal(t, "handoff", m.Reason)
	require.Equal(t, ck.SizeBytes, m.SizeBytes)
	require.NoError(t, e.host.Terminate(t.Context(), x.ExecutionID))

	restoredID := newID(t)
	rq := e.restoreReq(ck.CheckpointID, restoredID)
	rq.Image = other
	y, err := e.host.Restore(t.Context(), rq)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.host.Terminate(context.Background(), y.ExecutionID) })
	require.Equal(t, other, y.ImageDigest)

	res := e.sh(t, y.ExecutionID, `
echo f=$(stat -c '%a %u' d/f.txt) $(cat d/f.txt)
echo run=$(stat -c '%a' run.sh) $(./run.sh)
echo link=$(readlink link) $(cat link)
echo up=$(readlink d/up) $(d/up)
echo private=$(stat -c '%a' d/sub/private)
echo sparse=$(wc -c < d/sub/sparse)
echo dir=$(stat -c '%a' d)
`)
	got := kv(string(res.Stdout))
	require.Equal(t, "640 65532 hello", got["f"])
	require.Equal(t, "755 run-ok", got["run"])
	require.Equal(t, "d/f.txt hello", got["link"])
	require.Equal(t, "../run.sh run-ok", got["up"])
	require.Equal(t, "600", got["private"])
	require.Equal(t, "1000", got["sparse"])
	require.Equal(t, "755", got["dir"])

	// Tampered content is refused on restore.
	require.NoError(t, os.WriteFile(filepath.Join(e.store.Dir(), string(ck.CheckpointID)+".tar"), []byte("garbage"), 0o600))
	_, err = e.host.Restore(t.Context(), e.restoreReq(ck.CheckpointID, newID(t)))
	require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)
}

func TestLayeredCheckpoints(t *testing.T) {
	e := setup(t)
	a, _ := e.provision(t, nil)
	b, _ := e.provision(t, nil)
	e.sh(t, a.ExecutionID, "echo from-a > a.txt; echo a > shared.txt")
	e.sh(t, b.ExecutionID, "echo from-b > b.txt; echo b > shared.txt")
	ca, err := e.host.Checkpoint(t.Context(), a.ExecutionID, exechost.CheckpointRequest{})
	require.NoError(t, err)
	cb, err := e.host.Checkpoint(t.Context(), b.ExecutionID, exechost.CheckpointRequest{})
	require.NoError(t, err)

	join, _ := e.provision(t, func(r *exechost.ProvisionRequest) {
		r.Workspace.Checkpoints = []exechost.CheckpointID{ca.CheckpointID, cb.CheckpointID}
	})
	res := e.sh(t, join.ExecutionID, "cat a.txt b.txt shared.txt")
	require.Equal(t, "from-a\nfrom-b\nb\n", string(res.Stdout), "both layers, later wins")
}

func TestCheckpointRefusesHardLinksAndSparseBlowup(t *testing.T) {
	e := setup(t)
	t.Run("hard link", func(t *testing.T) {
		x, _ := e.provision(t, nil)
		e.sh(t, x.ExecutionID, "echo x > f; ln f h")
		_, err := e.host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{})
		require.ErrorIs(t, err, workspace.ErrUnsafeEntry)
		require.ErrorContains(t, err, "hard link")
	})
	t.Run("sparse file larger than the disk", func(t *testing.T) {
		x, _ := e.provision(t, func(r *exechost.ProvisionRequest) { r.Resources.DiskBytes = 4 << 20 })
		e.sh(t, x.ExecutionID, "truncate -s 1G sparse")
		_, err := e.host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{})
		require.Error(t, err)
		require.ErrorIs(t, err, workspace.ErrTooLarge)
	})
	entries, err := os.ReadDir(e.store.Dir())
	require.NoError(t, err)
	require.Empty(t, entries, "a failed checkpoint stores nothing")
}

// hostile builds a checkpoint whose tar holds one escaping entry after a
// harmless one, written straight into the store.
func putHostile(t *testing.T, e *env, id exechost.CheckpointID, tarBytes []byte) {
	t.Helper()
	_, err := e.sealed.Put(t.Context(), checkpoint.Manifest{ID: id, ExecutionID: "hostile", ImageDigest: e.base, Resources: limits()},
		bytes.NewReader(tarBytes), nil)
	require.NoError(t, err)
}

func TestHostileCheckpointsRefused(t *testing.T) {
	e := setup(t)
	outside := filepath.Join(t.TempDir(), "escaped")
	cases := map[string][]tarEntry{
		"dotdot":       {{name: "ok.txt", body: "ok"}, {name: "../../../../" + outside, body: "pwn"}},
		"absolute":     {{name: "ok.txt", body: "ok"}, {name: outside, body: "pwn"}},
		"symlink out":  {{name: "l", link: "../../../tmp"}, {name: "l/escaped", body: "pwn"}},
		"symlink abs":  {{name: "l", link: outside}},
		"through link": {{name: "d/", dir: true}, {name: "l", link: "d"}, {name: "l/x", body: "pwn"}},
		"hard link":    {{name: "ok.txt", body: "ok"}, {name: "h", hardlink: "/etc/passwd"}},
		"char device":  {{name: "null", dev: '3'}},
		"block device": {{name: "sda", dev: '4'}},
		"fifo":         {{name: "p", dev: '6'}},
	}
	for name, entries := range cases {
		t.Run(name, func(t *testing.T) {
			id := exechost.CheckpointID("ckpt-hostile-" + strings.ReplaceAll(name, " ", "-"))
			putHostile(t, e, id, makeTar(t, entries...))
			req := exechost.ProvisionRequest{ExecutionID: newID(t), Image: e.base, Resources: limits(), Labels: testLabels,
				Workspace: exechost.Workspace{Checkpoints: []exechost.CheckpointID{id}}}
			_, err := e.host.Provision(t.Context(), req)
			require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)
			require.ErrorIs(t, err, workspace.ErrUnsafeEntry)
			e.requireGone(t, req.ExecutionID)
			_, statErr := os.Stat(outside)
			require.True(t, os.IsNotExist(statErr), "nothing written outside")
		})
	}
}

func TestExecAndCheckpointSerialize(t *testing.T) {
	e := setup(t)
	x, _ := e.provision(t, nil)
	list := e.containersOf(t, x.ExecutionID)
	require.Len(t, list, 1)
	// A second runner watches the workspace behind the host's back.
	spy := runner.New(e.c, runner.Options{})

	var wg sync.WaitGroup
	wg.Add(1)
	var execErr error
	go func() {
		defer wg.Done()
		// Blocks on a FIFO until the test releases it, so the checkpoint is
		// requested while this exec is certainly running.
		_, execErr = e.host.Exec(context.Background(), x.ExecutionID, exechost.ExecRequest{
			Command: []string{"/bin/sh", "-c", "echo start > log; mkfifo /tmp/gate; cat /tmp/gate >/dev/null; echo end >> log"},
			Timeout: time.Minute,
		})
	}()
	require.Eventually(t, func() bool {
		res, err := spy.Run(t.Context(), list[0].ID, runner.Command{Argv: []string{"test", "-p", "/tmp/gate"}, User: "65532:65532"})
		return err == nil && res.ExitCode == 0
	}, 20*time.Second, 50*time.Millisecond)

	ckDone := make(chan *exechost.Checkpoint, 1)
	go func() {
		ck, err := e.host.Checkpoint(context.Background(), x.ExecutionID, exechost.CheckpointRequest{})
		if err != nil {
			t.Error(err)
		}
		ckDone <- ck
	}()
	select {
	case <-ckDone:
		t.Fatal("checkpoint ran while exec was running")
	default:
	}
	// Release the exec.
	_, err := spy.Run(t.Context(), list[0].ID, runner.Command{Argv: []string{"/bin/sh", "-c", "echo go > /tmp/gate"}, User: "65532:65532"})
	require.NoError(t, err)
	wg.Wait()
	require.NoError(t, execErr)
	ck := <-ckDone
	require.NotNil(t, ck)

	// The checkpoint saw the exec's final state, never the middle.
	y, err := e.host.Restore(t.Context(), e.restoreReq(ck.CheckpointID, newID(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.host.Terminate(context.Background(), y.ExecutionID) })
	require.Equal(t, "start\nend\n", string(e.sh(t, y.ExecutionID, "cat log").Stdout))
}

func TestRetriedProvisionReplacesLeftover(t *testing.T) {
	e := setup(t)
	x, req := e.provision(t, nil)
	before := e.containersOf(t, x.ExecutionID)
	require.Len(t, before, 1)

	// Same host, same ID: the live execution is returned as is.
	again, err := e.host.Provision(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, x, again)

	// A new host (as after a worker restart) replaces the leftover instead
	// of duplicating it.
	h2, err := docker.New(docker.Options{Client: e.c, Store: e.sealed, Owner: "other-worker:1:1", Runtime: sandboxRuntime})
	require.NoError(t, err)
	_, err = h2.Provision(t.Context(), req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h2.Terminate(context.Background(), req.ExecutionID) })
	after := e.containersOf(t, x.ExecutionID)
	require.Len(t, after, 1)
	require.NotEqual(t, before[0].ID, after[0].ID)
	require.Equal(t, "other-worker:1:1", after[0].Labels[policy.LabelOwner])
}

func TestReaper(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	hostname, _ := os.Hostname()
	mk := func(name, owner string, deadline time.Time, start bool) string {
		cr, err := e.c.ContainerCreate(ctx, &container.Config{
			Image: e.base, Entrypoint: []string{"sleep", "120"}, User: "65532:65532",
			Labels: map[string]string{"agentflow.test": "1", "agentflow.test.suite": suiteLabel, policy.LabelManaged: "true", policy.LabelExecution: name,
				policy.LabelOwner: owner, policy.LabelDeadline: strconv.FormatInt(deadline.Unix(), 10)},
		}, &container.HostConfig{AutoRemove: true, NetworkMode: "none", ReadonlyRootfs: true}, nil, nil, "")
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.c.ContainerRemove(context.Background(), cr.ID, container.RemoveOptions{Force: true}) })
		if start {
			require.NoError(t, e.c.ContainerStart(ctx, cr.ID, container.StartOptions{}))
		}
		return cr.ID
	}
	future := time.Now().Add(time.Hour)
	live, _ := e.provision(t, nil)
	// Every worker on this daemon reaps every agentflow sandbox (other
	// test packages run workers at the same time), so the dead owner's
	// sandbox can be taken by another reaper between its creation and
	// ours: then the set is made again. "expired" expires only in the
	// reap's shifted clock, so no real-time reaper takes it.
	var expired, deadOwner, remote, untracked, neverStarted string
	var reasons map[string]string
	for try := 1; ; try++ {
		expired = mk("reap-expired", e.host.Owner(), time.Now().Add(30*time.Second), true)
		deadOwner = mk("reap-dead-owner", fmt.Sprintf("%s:%d:1", hostname, 1<<22+7), future, true)
		remote = mk("reap-remote", "some-other-host:1:1", future, true)
		untracked = mk("reap-untracked", e.host.Owner(), future, true)
		neverStarted = mk("reap-never-started", "some-other-host:1:1", future, false)

		reaped, err := docker.Reap(ctx, e.c, docker.ReapOptions{Owner: e.host.Owner(), Labels: map[string]string{"agentflow.test.suite": suiteLabel},
			Now:  func() time.Time { return time.Now().Add(90 * time.Second) },
			Keep: func(id exechost.ExecutionID) bool { return id == live.ExecutionID }})
		require.NoError(t, err)
		// 90 s later: the never-started one is past its grace, and no
		// deadline but that of "expired" has passed.
		t.Logf("reaped: %+v", reaped)
		reasons = map[string]string{}
		for _, r := range reaped {
			reasons[r.ContainerID] = r.Reason
		}
		if _, ok := reasons[deadOwner]; ok || try == 3 {
			break
		}
		_, ierr := e.c.ContainerInspect(ctx, deadOwner)
		if !errdefs.IsNotFound(ierr) {
			break // still there and not reaped: the assertions below say so
		}
		t.Logf("another reaper on this daemon took the dead owner's sandbox first; again (try %d)", try)
		_ = e.c.ContainerRemove(ctx, remote, container.RemoveOptions{Force: true})
	}
	require.Equal(t, "deadline", reasons[expired])
	require.Equal(t, "owner_gone", reasons[deadOwner])
	require.Equal(t, "untracked", reasons[untracked])
	require.Equal(t, "never_started", reasons[neverStarted])
	require.NotContains(t, reasons, remote, "owners on other hosts are left to their deadline")
	require.Len(t, e.containersOf(t, live.ExecutionID), 1, "live sandboxes stay")

	// Host.Reap keeps what this host tracks.
	_, err := e.host.Reap(ctx, map[string]string{"agentflow.test.suite": suiteLabel})
	require.NoError(t, err)
	require.Len(t, e.containersOf(t, live.ExecutionID), 1)
	_ = e.c.ContainerRemove(ctx, remote, container.RemoveOptions{Force: true})
}
