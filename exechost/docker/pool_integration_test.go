//go:build integration

package docker_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/errdefs"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/exechost/docker/policy"
	"github.com/agentflow/agentflow/exechost/gitsource"
)

// poolLabels are the warm pool's labels in these tests: requests carrying
// them may be served from the pool; testLabels alone (every other test of
// the package) may not.
var poolLabels = func() map[string]string {
	l := maps.Clone(testLabels)
	l["agentflow.test.pool"] = "1"
	return l
}()

func pooledReq(r *exechost.ProvisionRequest) { r.Labels = poolLabels }

// setupPool is setup with a host whose warm pool is opts (labels
// poolLabels). The test fails when Drain leaves a pooled sandbox behind.
func setupPool(t *testing.T, opts docker.PoolOptions, mutate func(*docker.Options)) *env {
	t.Helper()
	e := setup(t)
	opts.Labels = poolLabels
	if opts.Warm == nil {
		opts.Warm = []string{"/bin/busybox", "/bin/tool"} // as the worker warms /bin/tool; the base image has none
	}
	o := docker.Options{Client: e.c, Store: e.sealed, KillGrace: time.Second, Runtime: sandboxRuntime, Pool: opts}
	if mutate != nil {
		mutate(&o)
	}
	h, err := docker.New(o)
	require.NoError(t, err)
	e.host = h
	t.Cleanup(func() {
		require.NoError(t, h.Drain(context.Background()))
		require.Empty(t, pooledContainers(t, e, h.Owner()), "Drain removes every pooled sandbox")
	})
	return e
}

// pooledContainers lists the pooled sandboxes (idle or taken) of owner.
func pooledContainers(t *testing.T, e *env, owner string) []container.Summary {
	t.Helper()
	list, err := e.c.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", policy.LabelPool),
		filters.Arg("label", policy.LabelOwner+"="+owner),
		filters.Arg("label", "agentflow.test.suite="+suiteLabel))})
	require.NoError(t, err)
	return list
}

func containerIDs(list []container.Summary) []string {
	ids := make([]string, 0, len(list))
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	slices.Sort(ids)
	return ids
}

// warm teaches the pool mutate's key (a miss, provisioned cold) and waits
// until n sandboxes of it are idle.
func (e *env) warm(t *testing.T, n int, mutate func(*exechost.ProvisionRequest)) {
	t.Helper()
	x, _ := e.provision(t, func(r *exechost.ProvisionRequest) {
		pooledReq(r)
		if mutate != nil {
			mutate(r)
		}
	})
	require.NoError(t, e.host.Terminate(t.Context(), x.ExecutionID))
	require.Eventually(t, func() bool { return e.host.PoolStats().Idle >= n }, time.Minute, 50*time.Millisecond,
		"pool never held %d sandboxes", n)
}

// sandbox inspects an execution's container by its name.
func (e *env) sandbox(t *testing.T, id exechost.ExecutionID) container.InspectResponse {
	t.Helper()
	ins, err := e.c.ContainerInspect(t.Context(), policy.ContainerName(id))
	require.NoError(t, err)
	return ins
}

func (e *env) requireContainerGone(t *testing.T, containerID string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := e.c.ContainerInspect(context.Background(), containerID)
		return errdefs.IsNotFound(err)
	}, 30*time.Second, 50*time.Millisecond, "container %s must be gone", containerID)
}

// toolView is everything a tool can observe of its sandbox that a pooled
// sandbox could get wrong: identity, environment, mounts and their
// options, tmpfs sizes, cgroup limits, seccomp and capabilities,
// read-only rootfs, network interfaces, the workspace's content and the
// processes it can see. Container-specific strings (IDs, layer names) are
// masked.
const toolView = `
echo "== id"; id
echo "== env"; env | sort
echo "== hostname"; hostname; pwd
echo "== status"; grep -E '^(Uid|Gid|Groups|NoNewPrivs|Seccomp|Cap(Inh|Prm|Eff|Bnd|Amb)|Sig(Ign|Blk)):' /proc/self/status; ls /proc/self/fd
echo "== mounts"; awk '{ s=0; for (i=7; i<=NF; i++) if ($i=="-") { s=i; break }; print $5, $6, $(s+1), $(s+3) }' /proc/self/mountinfo | sed -E 's/[0-9A-Za-z]{20,}/X/g' | sort
echo "== df"; df -k /workspace /tmp /dev/shm | awk 'NR>1 { print $6, $2 }'
echo "== cgroup"; cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max /sys/fs/cgroup/cpu.max /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us 2>/dev/null
echo "== ulimit"; ulimit -c; ulimit -n; ulimit -u
echo "== rootfs"; touch /probe 2>/dev/null && echo writable || echo read-only
echo "== net"; awk 'NR>2 { print $1 }' /proc/net/dev
echo "== workspace"; ls -A /workspace /tmp
echo "== processes"; ps -o user,pid | wc -l
`

// TestPoolSandboxLooksCold: a sandbox taken from the warm pool is, to the
// tool and in its container configuration, the sandbox a cold provision of
// the same request gives: same env (provision env and exec env merged the
// same way), user, mounts and tmpfs sizes, cgroup limits, seccomp, no
// capabilities, read-only rootfs, no network. The differences are the
// container's name, its labels (no per-request labels; agentflow.pool)
// and PID 1's sleep argument.
func TestPoolSandboxLooksCold(t *testing.T) {
	e := setupPool(t, docker.PoolOptions{Size: 1}, nil)
	req := func(r *exechost.ProvisionRequest) {
		pooledReq(r)
		r.Env = map[string]string{"GREETING": "hello", "MODE": "provision", "Z_LAST": "z"}
	}
	exec := exechost.ExecRequest{Command: []string{"/bin/sh", "-c", toolView}, Timeout: 30 * time.Second,
		Env:     map[string]string{"MODE": "exec", "A_FIRST": "a"},
		Secrets: map[string]string{"SERVICE_TOKEN": "not-a-real-token"}}
	view := func(id exechost.ExecutionID) string {
		res, err := e.host.Exec(t.Context(), id, exec)
		require.NoError(t, err)
		require.Zero(t, res.ExitCode, string(res.Stderr))
		return string(res.Stdout)
	}

	cold, _ := e.provision(t, req) // a miss: teaches the pool the key
	require.Equal(t, 0, e.host.PoolStats().Hits)
	require.Equal(t, 1, e.host.PoolStats().Misses)
	coldView := view(cold.ExecutionID)
	require.Eventually(t, func() bool { return e.host.PoolStats().Idle == 1 }, time.Minute, 50*time.Millisecond)
	pooled, _ := e.provision(t, req)
	require.Equal(t, 1, e.host.PoolStats().Hits)
	pooledView := view(pooled.ExecutionID)

	require.Equal(t, 1, e.host.PoolStats().Launched, "the pooled sandbox's first command started through its launcher")
	require.Equal(t, coldView, pooledView)
	for _, want := range []string{"GREETING=hello", "MODE=exec", "A_FIRST=a", "Z_LAST=z", "SERVICE_TOKEN=not-a-real-token", "read-only", "/workspace 32768"} {
		require.Contains(t, pooledView, want)
	}
	require.NotContains(t, pooledView, "eth0")
	t.Logf("tool view of both sandboxes:\n%s", pooledView)

	c, p := e.sandbox(t, cold.ExecutionID), e.sandbox(t, pooled.ExecutionID)
	require.Empty(t, c.Config.Labels[policy.LabelPool])
	require.NotEmpty(t, p.Config.Labels[policy.LabelPool])
	require.Equal(t, "/"+policy.ContainerName(pooled.ExecutionID), p.Name, "renamed to the execution's name")
	require.Equal(t, c.HostConfig, p.HostConfig, "same limits, tmpfs, security options, runtime, network")
	require.Equal(t, c.Config.User, p.Config.User)
	require.Equal(t, c.Config.Image, p.Config.Image)
	require.Equal(t, c.Config.WorkingDir, p.Config.WorkingDir)
	require.Equal(t, c.Config.Hostname, p.Config.Hostname)
	require.Equal(t, c.Config.NetworkDisabled, p.Config.NetworkDisabled)
	require.NotContains(t, strings.Join(p.Config.Env, " "), "GREETING", "a pooled sandbox's env travels with each exec")
}

// TestPoolSandboxServesOneAttempt: two Provisions never share a pooled
// container; Terminate removes it (it never goes back to the pool); and
// what a hostile tool does in one pooled sandbox (files, a background
// process, attacks on PID 1) is not seen by the next: each is fresh.
func TestPoolSandboxServesOneAttempt(t *testing.T) {
	e := setupPool(t, docker.PoolOptions{Size: 2}, nil)
	e.warm(t, 2, nil)
	a, _ := e.provision(t, pooledReq)
	b, _ := e.provision(t, pooledReq)
	require.Equal(t, 2, e.host.PoolStats().Hits)
	ca, cb := e.sandbox(t, a.ExecutionID).ID, e.sandbox(t, b.ExecutionID).ID
	require.NotEqual(t, ca, cb)

	res := e.sh(t, a.ExecutionID, `echo leak > /workspace/leak; echo leak > /tmp/leak
nohup sleep 1000 >/dev/null 2>&1 &
kill -KILL 1 2>/dev/null; kill -STOP 1 2>/dev/null; kill -TERM 1 2>/dev/null
echo "pid1 $(awk '/^State/ { print $2 }' /proc/1/status)"`)
	require.Contains(t, string(res.Stdout), "pid1 S", "the keeper survives a hostile tool")
	require.NoError(t, e.host.Terminate(t.Context(), a.ExecutionID))
	e.requireContainerGone(t, ca)

	require.Eventually(t, func() bool { return e.host.PoolStats().Idle >= 1 }, time.Minute, 50*time.Millisecond, "refilled")
	c, _ := e.provision(t, pooledReq)
	cc := e.sandbox(t, c.ExecutionID).ID
	require.NotContains(t, []string{ca, cb}, cc)
	for _, id := range []exechost.ExecutionID{b.ExecutionID, c.ExecutionID} {
		out := string(e.sh(t, id, `ls -A /workspace /tmp | grep -c leak; ps -o args | grep -v grep | grep -c 'sleep 1000'`).Stdout)
		require.Equal(t, "0\n0\n", out, "fresh sandbox: no file, no process of the earlier tool")
	}
	require.Equal(t, 3, e.host.PoolStats().Hits)
}

// TestPoolDeadlineCountsFromAssignment: a pooled sandbox that waited
// longer than its runtime still gets its whole runtime from the take
// (Execution.Deadline = take + Runtime), and is destroyed at that
// deadline: an exec is cut there, and an idle sandbox is removed by the
// host's timer.
func TestPoolDeadlineCountsFromAssignment(t *testing.T) {
	const runtime = 3 * time.Second
	e := setupPool(t, docker.PoolOptions{Size: 1, MaxIdle: 30 * time.Second}, nil)
	short := func(r *exechost.ProvisionRequest) { pooledReq(r); r.Resources.Runtime = runtime }
	e.warm(t, 1, short)
	idle := pooledContainers(t, e, e.host.Owner())
	require.Len(t, idle, 1)
	// Let it idle for longer than its runtime.
	require.Eventually(t, func() bool { return time.Since(time.Unix(idle[0].Created, 0)) > runtime+time.Second },
		time.Minute, 100*time.Millisecond)

	before := time.Now()
	x, _ := e.provision(t, short)
	after := time.Now()
	require.Equal(t, 1, e.host.PoolStats().Hits)
	require.Equal(t, idle[0].ID, e.sandbox(t, x.ExecutionID).ID)
	require.False(t, x.Deadline.Before(before.Add(runtime)), "deadline %s counts from the take (%s)", x.Deadline, before)
	require.False(t, x.Deadline.After(after.Add(runtime)))

	res := e.sh(t, x.ExecutionID, "sleep 1; echo alive")
	require.Equal(t, "alive\n", string(res.Stdout), "the sandbox is older than its runtime and still serves")
	res2, err := e.host.Exec(t.Context(), x.ExecutionID, exechost.ExecRequest{Command: []string{"sleep", "60"}})
	require.ErrorIs(t, err, exechost.ErrTimeout)
	require.True(t, res2.TimedOut)
	require.False(t, time.Now().Before(x.Deadline), "not cut before take + runtime")
	e.requireContainerGone(t, idle[0].ID)

	// An idle pooled sandbox is removed by the host-side deadline.
	require.Eventually(t, func() bool { return e.host.PoolStats().Idle == 1 }, time.Minute, 50*time.Millisecond)
	y, _ := e.provision(t, short)
	cy := e.sandbox(t, y.ExecutionID).ID
	e.requireContainerGone(t, cy)
	require.False(t, time.Now().Before(y.Deadline))
	_, err = e.host.Exec(t.Context(), y.ExecutionID, exechost.ExecRequest{Command: []string{"true"}})
	require.ErrorIs(t, err, exechost.ErrTerminated)
}

// TestPoolReplacesExpiredAndDrains: an idle pooled sandbox older than
// MaxIdle is removed and replaced; Drain removes every pooled sandbox, and
// later provisions run cold.
func TestPoolReplacesExpiredAndDrains(t *testing.T) {
	e := setupPool(t, docker.PoolOptions{Size: 2, MaxIdle: 3 * time.Second}, nil)
	e.warm(t, 2, nil)
	first := containerIDs(pooledContainers(t, e, e.host.Owner()))
	require.Len(t, first, 2)
	require.Eventually(t, func() bool {
		now := containerIDs(pooledContainers(t, e, e.host.Owner()))
		for _, id := range first {
			if slices.Contains(now, id) {
				return false
			}
		}
		return e.host.PoolStats().Idle == 2
	}, 2*time.Minute, 100*time.Millisecond, "expired pooled sandboxes are replaced")

	require.NoError(t, e.host.Drain(t.Context()))
	require.Empty(t, pooledContainers(t, e, e.host.Owner()))
	stats := e.host.PoolStats()
	x, _ := e.provision(t, pooledReq)
	require.Equal(t, stats.Hits, e.host.PoolStats().Hits, "after Drain, provisions run cold")
	require.Empty(t, e.sandbox(t, x.ExecutionID).Config.Labels[policy.LabelPool])
	require.Empty(t, pooledContainers(t, e, e.host.Owner()), "and nothing refills")
}

// TestPoolLeftoversAreReaped: the pool of a worker killed without draining
// (idle and taken sandboxes) is removed by the reaper: of a restarted
// worker with the same owner (untracked) or, for another owner, once the
// keeper's backstop deadline has passed. A live host's own reap leaves its
// pool alone.
func TestPoolLeftoversAreReaped(t *testing.T) {
	t.Run("same owner", func(t *testing.T) {
		owner := docker.DefaultOwner()
		e := setupPool(t, docker.PoolOptions{Size: 2}, func(o *docker.Options) { o.Owner = owner })
		e.warm(t, 2, nil)
		x, _ := e.provision(t, pooledReq)
		taken := e.sandbox(t, x.ExecutionID).ID
		require.Eventually(t, func() bool { return e.host.PoolStats().Idle == 2 }, time.Minute, 50*time.Millisecond)
		all := containerIDs(pooledContainers(t, e, owner))
		require.Len(t, all, 3)
		require.Contains(t, all, taken)

		scope := map[string]string{"agentflow.test.suite": suiteLabel, policy.LabelOwner: owner}
		reaped, err := e.host.Reap(t.Context(), scope)
		require.NoError(t, err)
		require.Empty(t, reaped, "a live host's reap keeps its pool and its taken sandbox")

		e.host.AbandonPoolForTest() // the worker dies: nothing is drained
		restarted, err := docker.New(docker.Options{Client: e.c, Store: e.sealed, Owner: owner})
		require.NoError(t, err)
		reaped, err = restarted.Reap(t.Context(), scope)
		require.NoError(t, err)
		var got []string
		for _, r := range reaped {
			require.Equal(t, "untracked", r.Reason)
			got = append(got, r.ContainerID)
		}
		slices.Sort(got)
		require.Equal(t, all, got)
		require.Empty(t, pooledContainers(t, e, owner))
	})
	t.Run("other owner after the backstop", func(t *testing.T) {
		const maxIdle = 2 * time.Second
		e := setupPool(t, docker.PoolOptions{Size: 1, MaxIdle: maxIdle}, nil)
		e.warm(t, 1, nil)
		e.host.AbandonPoolForTest()
		left := pooledContainers(t, e, e.host.Owner())
		require.Len(t, left, 1)
		opts := docker.ReapOptions{Owner: "someone-else", OwnerAlive: func(string) bool { return true },
			Labels: map[string]string{"agentflow.test.suite": suiteLabel, policy.LabelOwner: e.host.Owner()}}
		reaped, err := docker.Reap(t.Context(), e.c, opts)
		require.NoError(t, err)
		require.Empty(t, reaped, "before its backstop deadline a live owner's pool stays")
		backstop := time.Unix(left[0].Created, 0).Add(maxIdle + limits().Runtime + docker.PoolSlack + 3*time.Second)
		opts.Now = func() time.Time { return backstop }
		reaped, err = docker.Reap(t.Context(), e.c, opts)
		require.NoError(t, err)
		require.Len(t, reaped, 1)
		require.Equal(t, "deadline", reaped[0].Reason)
		require.Empty(t, pooledContainers(t, e, e.host.Owner()))
	})
}

// TestPoolUncoveredRequestsRunCold: requests the pool does not cover — a
// git workspace, egress, a GPU, labels without the pool's — are
// provisioned cold on a host with a pool and leave the pool untouched; env
// with per-request values is covered: each sandbox sees its own.
func TestPoolUncoveredRequestsRunCold(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	repo := filepath.Join(root, "repo")
	require.NoError(t, os.MkdirAll(repo, 0o755))
	git(t, repo, "init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "f.txt"), []byte("from git\n"), 0o644))
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-q", "-m", "one")

	e := setupPool(t, docker.PoolOptions{Size: 1}, func(o *docker.Options) { o.Git = gitsource.Config{Roots: []string{root}} })
	e.warm(t, 1, nil)
	stats := e.host.PoolStats()
	unchanged := func(what string) {
		t.Helper()
		got := e.host.PoolStats()
		require.Equal(t, stats.Hits, got.Hits, what)
		require.Equal(t, stats.Misses, got.Misses, what)
	}

	x, _ := e.provision(t, func(r *exechost.ProvisionRequest) {
		pooledReq(r)
		r.Workspace.Git = &exechost.GitSource{RepositoryPath: repo, Revision: "main"}
	})
	require.Equal(t, "from git\n", string(e.sh(t, x.ExecutionID, "cat f.txt").Stdout))
	require.Empty(t, e.sandbox(t, x.ExecutionID).Config.Labels[policy.LabelPool])
	unchanged("git workspace")

	y, _ := e.provision(t, nil) // testLabels only: not the pool's labels
	require.Empty(t, e.sandbox(t, y.ExecutionID).Config.Labels[policy.LabelPool])
	unchanged("labels without the pool's")

	gpu := exechost.ProvisionRequest{ExecutionID: newID(t), Image: e.base, Resources: limits(), Labels: poolLabels}
	gpu.Resources.GPUs = 1
	if x, err := e.host.Provision(t.Context(), gpu); err == nil { // a daemon without GPUs refuses it
		t.Cleanup(func() { require.NoError(t, e.host.Terminate(context.Background(), x.ExecutionID)) })
		require.Empty(t, e.sandbox(t, x.ExecutionID).Config.Labels[policy.LabelPool])
	}
	unchanged("GPU")
	require.Equal(t, 1, e.host.PoolStats().Idle, "uncovered requests never take a pooled sandbox")

	// Env differs per request and is still served from the pool.
	for i, v := range []string{"one", "two"} {
		z, _ := e.provision(t, func(r *exechost.ProvisionRequest) {
			pooledReq(r)
			r.Env = map[string]string{"PER_REQUEST": v}
		})
		require.Equal(t, stats.Hits+i+1, e.host.PoolStats().Hits)
		require.Equal(t, v+"\n", string(e.sh(t, z.ExecutionID, `echo "$PER_REQUEST"`).Stdout))
		require.Eventually(t, func() bool { return e.host.PoolStats().Idle == 1 }, time.Minute, 50*time.Millisecond)
	}
}

// TestPoolEgressRunsCold: a NetworkEgress request on a host with a pool
// gets its boundary as always and no pooled sandbox.
func TestPoolEgressRunsCold(t *testing.T) {
	var egress docker.EgressOptions
	ee := setupEgress(t, func(_ *egressEnv, o *docker.EgressOptions) { egress = *o })
	pe := setupPool(t, docker.PoolOptions{Size: 1}, func(o *docker.Options) { o.Egress = egress })
	ee.host = pe.host
	pe.warm(t, 1, nil)
	stats := pe.host.PoolStats()
	req := exechost.ProvisionRequest{ExecutionID: newID(t), Image: ee.tool, Resources: limits(), Labels: poolLabels,
		Network: exechost.NetworkEgress, Egress: &exechost.EgressPolicy{Rules: []exechost.EgressRule{rule("upstream.test", 8080)},
			MaxBytes: exechost.DefaultEgressBytes}}
	x, err := pe.host.Provision(t.Context(), req)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, pe.host.Terminate(context.Background(), x.ExecutionID))
		ee.requireBoundaryGone(t, x.ExecutionID)
	})
	got := ee.probe(t, x.ExecutionID, map[string]any{"kind": "http", "url": "http://upstream.test:8080/"})
	require.True(t, got[0].OK, "%+v", got[0])
	require.Empty(t, pe.sandbox(t, x.ExecutionID).Config.Labels[policy.LabelPool])
	require.Equal(t, stats.Hits, pe.host.PoolStats().Hits)
	require.Equal(t, stats.Misses, pe.host.PoolStats().Misses)
	require.Equal(t, 1, pe.host.PoolStats().Idle)
}

// TestPoolTakenLeftoverIsReplaced: a pooled sandbox taken by an execution
// carries the pool's labels and the execution's name; when its worker dies
// and the attempt is delivered again, the next host replaces it by name,
// whether it provisions from its own pool (rename) or cold (create).
func TestPoolTakenLeftoverIsReplaced(t *testing.T) {
	dead := setupPool(t, docker.PoolOptions{Size: 2}, nil)
	dead.warm(t, 2, nil)
	x, reqX := dead.provision(t, pooledReq)
	y, reqY := dead.provision(t, pooledReq)
	leftX, leftY := dead.sandbox(t, x.ExecutionID).ID, dead.sandbox(t, y.ExecutionID).ID
	dead.host.AbandonPoolForTest() // the worker dies; its sandboxes stay

	next := setupPool(t, docker.PoolOptions{Size: 1}, nil)
	next.warm(t, 1, nil)
	hits := next.host.PoolStats().Hits
	_, err := next.host.Provision(t.Context(), reqX)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, next.host.Terminate(context.Background(), reqX.ExecutionID)) })
	require.Equal(t, hits+1, next.host.PoolStats().Hits, "served from the new host's pool (rename over the leftover)")
	nowX := next.sandbox(t, x.ExecutionID)
	require.NotEqual(t, leftX, nowX.ID)
	next.requireContainerGone(t, leftX)
	require.Equal(t, "ok\n", string(next.sh(t, x.ExecutionID, "echo ok").Stdout))

	cold := setup(t) // a host without a pool: create over the leftover
	_, err = cold.host.Provision(t.Context(), reqY)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cold.host.Terminate(context.Background(), reqY.ExecutionID)) })
	require.NotEqual(t, leftY, cold.sandbox(t, y.ExecutionID).ID)
	cold.requireContainerGone(t, leftY)
}

// launchView prints, hex-encoded, every argument and the whole environment
// (NUL-separated, sorted) the tool was given, its stdin, and whether
// anything ran a command hidden in a value.
const launchView = `
for a in "$@"; do printf '%s' "$a" | od -An -tx1 | tr -d ' \n'; echo; done
echo "== env"; env -0 | od -An -tx1 | tr -d ' \n'; echo
echo "== stdin"; od -An -tx1 | tr -d ' \n'; echo
echo "== pwned"; ls /tmp/pwned /workspace/pwned 2>&1 | grep -v 'No such file' || true
`

// hostileValues reach a tool byte for byte as arguments, step env and
// secrets, through a pooled sandbox's launcher exactly as through a plain
// exec, and nothing in them runs.
var hostileValues = []string{
	"", " ", "it's", "'", `'\''`, `"`, `\`, "$HOME", "${PATH}", "$(touch /tmp/pwned)", "`touch /tmp/pwned`",
	"a;touch /tmp/pwned", "a && touch /workspace/pwned", "a\nb", "\n", "a\n'\nb", `'"$nl"'`, "$nl", "\t\r\n",
	"*", "[a]", "~", "#x", "-u", "--", "=", "a=b=c", "ünïcödé ✓", "\x01\x7f", "\u2028", "exit 0", "}", ")",
}

// TestPoolLauncherCarriesHostileValues: through the launcher (the first
// exec of a pooled sandbox, busybox ash here) a tool gets the argv, env,
// secrets and stdin a cold sandbox's exec gives it, for every hostile
// value; nothing in them runs.
func TestPoolLauncherCarriesHostileValues(t *testing.T) {
	e := setupPool(t, docker.PoolOptions{Size: 1}, nil)
	env, secrets := map[string]string{}, map[string]string{}
	for i, v := range hostileValues {
		env[fmt.Sprintf("V_%d", i)] = v
		secrets[fmt.Sprintf("S_%d", i)] = v + "-secret"
	}
	exec := exechost.ExecRequest{
		Command: append([]string{"/bin/sh", "-c", launchView, "sh"}, hostileValues...),
		Env:     env, Secrets: secrets, Timeout: 30 * time.Second,
		Stdin: []byte("{\"input\": \"it's $(id)\"}\n\x00tail"),
	}
	view := func(id exechost.ExecutionID) string {
		res, err := e.host.Exec(t.Context(), id, exec)
		require.NoError(t, err)
		require.Zero(t, res.ExitCode, string(res.Stderr))
		require.Empty(t, string(res.Stderr))
		return string(res.Stdout)
	}
	cold, _ := e.provision(t, func(r *exechost.ProvisionRequest) { pooledReq(r); r.Env = map[string]string{"P": "it's\nprovision"} })
	coldView := view(cold.ExecutionID)
	require.Eventually(t, func() bool { return e.host.PoolStats().Idle == 1 }, time.Minute, 50*time.Millisecond)
	pooled, _ := e.provision(t, func(r *exechost.ProvisionRequest) { pooledReq(r); r.Env = map[string]string{"P": "it's\nprovision"} })
	pooledView := view(pooled.ExecutionID)
	require.Equal(t, 1, e.host.PoolStats().Launched)

	// The environment's order is the exec's or env's; its content is equal.
	envOf := func(view string) ([]string, string) {
		lines := strings.Split(view, "\n")
		b, err := hex.DecodeString(lines[len(hostileValues)+1])
		require.NoError(t, err)
		env := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		slices.Sort(env)
		lines[len(hostileValues)+1] = "(env)"
		return env, strings.Join(lines, "\n")
	}
	coldEnv, coldRest := envOf(coldView)
	env2, rest := envOf(pooledView)
	require.Equal(t, coldEnv, env2)
	require.Equal(t, coldRest, rest)

	lines := strings.Split(rest, "\n")
	for i, v := range hostileValues {
		require.Equal(t, hex.EncodeToString([]byte(v)), lines[i], "argument %d", i)
	}
	for i, v := range hostileValues {
		require.Contains(t, env2, fmt.Sprintf("V_%d=%s", i, v))
		require.Contains(t, env2, fmt.Sprintf("S_%d=%s-secret", i, v))
	}
	require.Contains(t, env2, "P=it's\nprovision")
	require.Equal(t, hex.EncodeToString(exec.Stdin), lines[len(hostileValues)+3])
	require.True(t, strings.HasSuffix(pooledView, "== pwned\n"), "a value ran as a command:\n%s", pooledView)
}

// TestPoolLauncherFallsBack: a pooled sandbox whose launcher died while it
// waited (killed from outside) still runs its first command, once, as a
// plain exec; so does a command the launcher cannot carry (an env name that
// is not a shell name). Neither counts as launched.
func TestPoolLauncherFallsBack(t *testing.T) {
	e := setupPool(t, docker.PoolOptions{Size: 2}, nil)
	e.warm(t, 2, nil)
	once := exechost.ExecRequest{Command: []string{"/bin/sh", "-c", "echo ran >> /workspace/count; cat /workspace/count | wc -l"},
		Timeout: 30 * time.Second}

	killed, _ := e.provision(t, pooledReq)
	id := e.sandbox(t, killed.ExecutionID).ID
	// As the tool's user: root in the sandbox has no capability to signal it.
	// ([r]ead: the pattern does not match this script's own command line.)
	ex, err := e.c.ContainerExecCreate(t.Context(), id, container.ExecOptions{User: "65532:65532", Cmd: []string{"/bin/sh", "-c",
		`p=$(ps -o pid,args | grep '[r]ead -r l' | awk '{ print $1 }'); [ -n "$p" ] && kill -KILL $p`}})
	require.NoError(t, err)
	require.NoError(t, e.c.ContainerExecStart(t.Context(), ex.ID, container.ExecStartOptions{}))
	require.Eventually(t, func() bool {
		ins, err := e.c.ContainerExecInspect(t.Context(), ex.ID)
		return err == nil && !ins.Running && ins.ExitCode == 0
	}, 30*time.Second, 50*time.Millisecond, "the launcher was found and killed")
	res, err := e.host.Exec(t.Context(), killed.ExecutionID, once)
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, string(res.Stderr))
	require.Equal(t, "1\n", string(res.Stdout), "ran once")
	require.Empty(t, string(res.Stderr), "nothing of the dead launcher's")

	// Bytes that are not UTF-8: the exec API's JSON makes each one U+FFFD,
	// which the launcher would not; so such a command execs, and gets what
	// it would get in a cold sandbox.
	odd, _ := e.provision(t, pooledReq)
	notUTF8 := once
	notUTF8.Command = []string{"/bin/sh", "-c", `echo ran >> /workspace/count; printf '%s' "$0" | od -An -tx1 | tr -d ' \n'`, "a\xffb"}
	res, err = e.host.Exec(t.Context(), odd.ExecutionID, notUTF8)
	require.NoError(t, err)
	require.Equal(t, hex.EncodeToString([]byte("a\uFFFDb")), string(res.Stdout))
	out := string(e.sh(t, odd.ExecutionID, "wc -l < /workspace/count").Stdout)
	require.Equal(t, "1\n", out, "ran once")
	require.Equal(t, 0, e.host.PoolStats().Launched)
}

// TestPoolLauncherTimeoutFromTheCommand: a launcher prepared long before
// its command does not shorten the command's timeout (it counts from the
// command), and a command through a launcher that overruns it is cut and
// its sandbox destroyed, like any exec.
func TestPoolLauncherTimeoutFromTheCommand(t *testing.T) {
	e := setupPool(t, docker.PoolOptions{Size: 2}, nil)
	e.warm(t, 2, nil)
	time.Sleep(3 * time.Second) // the launchers have waited longer than the timeout below
	a, _ := e.provision(t, pooledReq)
	res, err := e.host.Exec(t.Context(), a.ExecutionID, exechost.ExecRequest{Command: []string{"/bin/sh", "-c", "sleep 1; echo ok"}, Timeout: 2500 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, "ok\n", string(res.Stdout))

	b, _ := e.provision(t, pooledReq)
	cid := e.sandbox(t, b.ExecutionID).ID
	res, err = e.host.Exec(t.Context(), b.ExecutionID, exechost.ExecRequest{Command: []string{"/bin/sh", "-c", "sleep 60"}, Timeout: time.Second})
	require.ErrorIs(t, err, exechost.ErrTimeout)
	require.True(t, res.TimedOut)
	e.requireContainerGone(t, cid)
	require.Equal(t, 2, e.host.PoolStats().Launched)
}

// TestPoolLauncherRunsNothingPlanted: an earlier step's checkpoint plants
// programs (env, printf, cat, [, sh) in a workspace directory that the
// image's PATH names. The launcher of the next step's pooled sandbox runs
// none of them with that step's secrets: env by the absolute path it found
// while the sandbox was fresh, the rest shell builtins. The tool, exec'd by
// absolute path, runs as from a plain exec. (busybox ash runs its applets
// without looking at PATH, so in these images the guard is end to end;
// TestLaunchLineRunsNothingFromPath, with the host's dash, is the test
// that fails on a line that looks env up through PATH.)
func TestPoolLauncherRunsNothingPlanted(t *testing.T) {
	e := setupPool(t, docker.PoolOptions{Size: 1}, nil)
	img := e.imageWithChanges(t, "agentflow-test/path-into-workspace:1", "LABEL agentflow.test=1",
		"ENV PATH=/workspace/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	// The earlier step (cold: its labels are not the pool's) plants them.
	a, _ := e.provision(t, func(r *exechost.ProvisionRequest) { r.Image = img })
	res := e.sh(t, a.ExecutionID, `mkdir -p /workspace/bin && for p in env printf cat '[' test sh; do
  printf '#!/bin/busybox sh\necho "planted $0 $* $SECRET" >> /workspace/pwned\n' > "/workspace/bin/$p" && chmod +x "/workspace/bin/$p"; done`)
	require.Zero(t, res.ExitCode, string(res.Stderr))
	ck, err := e.host.Checkpoint(t.Context(), a.ExecutionID, exechost.CheckpointRequest{Reason: "plant"})
	require.NoError(t, err)

	onImg := func(r *exechost.ProvisionRequest) { pooledReq(r); r.Image = img }
	e.warm(t, 1, onImg)
	b, _ := e.provision(t, func(r *exechost.ProvisionRequest) {
		onImg(r)
		r.Workspace = exechost.Workspace{Checkpoints: []exechost.CheckpointID{ck.CheckpointID}}
	})
	require.Equal(t, 1, e.host.PoolStats().Hits)
	res, err = e.host.Exec(t.Context(), b.ExecutionID, exechost.ExecRequest{
		Command: []string{"/bin/busybox", "sh", "-c", `/bin/busybox cat /workspace/pwned 2>/dev/null; echo "tool ran"`},
		Secrets: map[string]string{"SECRET": "s3cr3t"}, Timeout: 30 * time.Second,
	})
	require.NoError(t, err)
	require.Equal(t, 1, e.host.PoolStats().Launched, "through the launcher")
	require.Equal(t, "tool ran\n", string(res.Stdout), "a planted program ran: %s", res.Stderr)
}
