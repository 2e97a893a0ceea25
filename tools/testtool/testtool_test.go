package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
	"github.com/stretchr/testify/require"
)

type result struct {
	code           int
	stdout, stderr string
}

func runTool(t *testing.T, ctx context.Context, stdin string, env map[string]string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := toolkit.Run(ctx, tool, toolkit.IO{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return env[k] }}, handle)
	return result{code, out.String(), errb.String()}
}

func TestModes(t *testing.T) {
	tests := []struct {
		name       string
		stdin      string
		env        map[string]string
		wantCode   int
		wantStdout string         // exact, when set
		wantJSON   map[string]any // stdout decodes to this, when set
		wantStderr string         // substring
	}{
		{name: "ok echoes", stdin: `{"mode":"ok","x":[1,"a"]}`, wantJSON: map[string]any{"mode": "ok", "x": []any{json.Number("1"), "a"}}},
		{name: "exit", stdin: `{"mode":"exit","code":7,"stderr":"boom\n"}`, wantCode: 7, wantStdout: "", wantStderr: "boom"},
		{name: "trickle", stdin: `{"mode":"trickle","lines":3,"seconds":0,"message":"tick"}`, wantJSON: map[string]any{"lines": json.Number("3")}, wantStderr: "tick line 1/3\ntick line 2/3\ntick line 3/3\n"},
		{name: "exit default code", stdin: `{"mode":"exit"}`, wantCode: 1, wantStdout: ""},
		{name: "badjson", stdin: `{"mode":"badjson"}`, wantStdout: "this is not JSON {\"half\": \n"},
		{name: "multijson", stdin: `{"mode":"multijson"}`, wantStdout: "{\"first\":1}\n{\"second\":2}\n"},
		{name: "errorfield exit 0", stdin: `{"mode":"errorfield","message":"nope"}`, wantJSON: map[string]any{"error": "nope"}},
		{name: "errorfield exit 3", stdin: `{"mode":"errorfield","code":3}`, wantCode: 3, wantJSON: map[string]any{"error": "tool reported an error"}},
		{name: "flaky fails early", stdin: `{"mode":"flaky","until":3}`, env: map[string]string{"AGENTFLOW_ATTEMPT": "2"}, wantCode: 1,
			wantJSON: map[string]any{"error": "flaky: attempt 2 fails (succeeds from attempt 3)"}},
		{name: "flaky succeeds", stdin: `{"mode":"flaky","until":3}`, env: map[string]string{"AGENTFLOW_ATTEMPT": "3"}, wantJSON: map[string]any{"attempt": json.Number("3"), "until": json.Number("3")}},
		{name: "echoenv", stdin: `{"mode":"echoenv","name":"TESTTOOL_PROBE","names":["TESTTOOL_ABSENT"]}`,
			wantJSON: map[string]any{"name": "TESTTOOL_PROBE", "value": "s3cr3t", "present": true, "values": map[string]any{"TESTTOOL_PROBE": "s3cr3t", "TESTTOOL_ABSENT": nil}}},
		{name: "flood", stdin: `{"mode":"flood","stdout_bytes":70000,"stderr_bytes":10}`, wantStdout: strings.Repeat("o", 70000), wantStderr: "eeeeeeeeee"},
		{name: "sleep zero", stdin: `{"mode":"sleep","seconds":0}`, wantJSON: map[string]any{"slept_seconds": json.Number("0")}},
		{name: "unknown mode", stdin: `{"mode":"dance"}`, wantCode: 2, wantJSON: map[string]any{"error": "invalid input: unknown mode \"dance\" (one of " + strings.Join(modeNames(), ", ") + ")"}},
	}
	t.Setenv("TESTTOOL_PROBE", "s3cr3t")
	t.Run("clock", func(t *testing.T) {
		before := time.Now().UnixNano()
		r := runTool(t, t.Context(), `{"mode":"clock"}`, nil)
		require.Zero(t, r.code, r.stdout)
		var out struct {
			ReadAt string `json:"read_at_unix_nano"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		ns, err := strconv.ParseInt(out.ReadAt, 10, 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, ns, before)
		require.LessOrEqual(t, ns, time.Now().UnixNano())
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runTool(t, t.Context(), tt.stdin, tt.env)
			require.Equal(t, tt.wantCode, r.code, r.stdout)
			require.Contains(t, r.stderr, tt.wantStderr)
			if tt.wantJSON != nil {
				dec := json.NewDecoder(strings.NewReader(r.stdout))
				dec.UseNumber()
				var got map[string]any
				require.NoError(t, dec.Decode(&got))
				require.Equal(t, tt.wantJSON, got)
				return
			}
			require.Equal(t, tt.wantStdout, r.stdout)
		})
	}
}

func TestSigtermAndInterruptedSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // as toolkit.Main's signal context does on SIGTERM
	r := runTool(t, ctx, `{"mode":"sigterm","seconds":60}`, nil)
	require.Equal(t, 143, r.code)
	require.Contains(t, r.stderr, "got SIGTERM")
	require.Empty(t, r.stdout)

	r = runTool(t, ctx, `{"mode":"sleep","seconds":60}`, nil)
	require.Equal(t, 143, r.code)
	require.Contains(t, r.stdout, "interrupted by SIGTERM")
}

func TestBigOutput(t *testing.T) {
	for _, n := range []int{0, 100, 1 << 20} {
		data, err := json.Marshal(BigOutput(n))
		require.NoError(t, err)
		require.InDelta(t, max(n, 40), len(data), 40, "n=%d", n)
	}
}

func TestDiskFillBounded(t *testing.T) {
	dir := t.TempDir()
	r := runTool(t, t.Context(), `{"mode":"diskfill","max_mib":2}`, map[string]string{"AGENTFLOW_WORKSPACE": dir})
	require.Equal(t, 0, r.code, r.stdout)
	require.JSONEq(t, `{"bytes_written":2097152,"enospc":false}`, r.stdout)
	st, err := os.Stat(filepath.Join(dir, "fill.bin"))
	require.NoError(t, err)
	require.Equal(t, int64(2<<20), st.Size())

	r = runTool(t, t.Context(), `{"mode":"diskfill","max_mib":1,"remove":true}`, map[string]string{"AGENTFLOW_WORKSPACE": dir})
	require.Equal(t, 0, r.code)
	_, err = os.Stat(filepath.Join(dir, "fill.bin"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestParseStatus(t *testing.T) {
	status := "Name:\ttool\nUid:\t65532\t65532\t65532\t65532\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\nVmRSS:\t100 kB\n"
	require.Equal(t, map[string]string{
		"Uid": "65532 65532 65532 65532", "CapEff": "0000000000000000", "CapBnd": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2",
	}, ParseStatus(status))
}

func TestParseNetDev(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{name: "none network", in: "Inter-|   Receive\n face |bytes\n    lo:       0       0    0    0\n", want: []string{"lo"}},
		{name: "bridge", in: "h1\nh2\n  eth0: 1 2 3\n    lo: 0 0\n", want: []string{"eth0", "lo"}},
		{name: "empty", in: "", want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, ParseNetDev(tt.in))
			require.Equal(t, len(tt.want) > 1, nonLoopback(tt.want))
		})
	}
}

func TestParseMountinfo(t *testing.T) {
	mi := strings.Join([]string{
		`600 500 0:50 / / ro,relatime master:1 - overlay overlay rw,lowerdir=/l,upperdir=/u`,
		`601 600 0:51 / /workspace rw,nosuid,nodev,relatime - tmpfs tmpfs rw,size=65536k,uid=65532,gid=65532`,
		`602 600 0:52 / /tmp rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,size=16384k`,
		`603 600 0:53 / /with\040space rw - tmpfs tmpfs rw`,
		`garbage line`,
	}, "\n")
	got := ParseMountinfo(mi, "/", "/workspace/", "/tmp", "/with space", "/absent")
	require.Equal(t, map[string]Mount{
		"/":           {MountPoint: "/", FSType: "overlay", Source: "overlay", Options: []string{"ro", "relatime"}, SuperOptions: []string{"rw", "lowerdir=/l", "upperdir=/u"}},
		"/workspace":  {MountPoint: "/workspace", FSType: "tmpfs", Source: "tmpfs", Options: []string{"rw", "nosuid", "nodev", "relatime"}, SuperOptions: []string{"rw", "size=65536k", "uid=65532", "gid=65532"}},
		"/tmp":        {MountPoint: "/tmp", FSType: "tmpfs", Source: "tmpfs", Options: []string{"rw", "nosuid", "nodev", "noexec", "relatime"}, SuperOptions: []string{"rw", "size=16384k"}},
		"/with space": {MountPoint: "/with space", FSType: "tmpfs", Source: "tmpfs", Options: []string{"rw"}, SuperOptions: []string{"rw"}},
	}, got)
}

func TestEnvNamesDropValues(t *testing.T) {
	require.Equal(t, []string{"A", "B", "EMPTY"}, EnvNames([]string{"B=secret=value", "A=1", "EMPTY="}))
}

func TestFlakyOutcome(t *testing.T) {
	tests := []struct {
		attempt, until int
		fail           bool
	}{
		{0, 2, true}, {1, 2, true}, {2, 2, false}, {5, 2, false}, {1, 1, false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.fail, FlakyOutcome(tt.attempt, tt.until) != nil, "%+v", tt)
	}
}

func TestTrickleWaitsForItsGate(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gate"), nil, 0o600))
	r := runTool(t, t.Context(), `{"mode":"trickle","lines":2,"seconds":0,"gate":"../gate"}`, map[string]string{"AGENTFLOW_WORKSPACE": dir})
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "trickle line 1/2\ntrickle line 2/2\n")

	// Without the gate it waits until stopped.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r = runTool(t, ctx, `{"mode":"trickle","lines":2,"seconds":0,"gate":"missing"}`, map[string]string{"AGENTFLOW_WORKSPACE": dir})
	require.Equal(t, 143, r.code, r.stderr)
	require.Contains(t, r.stderr, "trickle line 1/2\n")
	require.NotContains(t, r.stderr, "line 2/2")
}
