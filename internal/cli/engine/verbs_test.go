package engine

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/workflows"
)

var update = flag.Bool("update", false, "rewrite golden files")

func testPlan() *spec.Plan {
	return &spec.Plan{
		Name: "demo", Version: "1.0.0",
		Inputs: []spec.InputDecl{
			{Name: "email_id", Type: spec.TypeString, Required: true},
			{Name: "limit", Type: spec.TypeNumber, Default: 3.0},
			{Name: "verbose", Type: spec.TypeBoolean},
			{Name: "tags", Type: spec.TypeArray},
			{Name: "meta", Type: spec.TypeObject},
		},
		Secrets: []spec.SecretDecl{
			{Name: "set_env", Source: "env://AF_TEST_SET"},
			{Name: "unset_env", Source: "env://AF_TEST_UNSET"},
			{Name: "file_ok", Source: "file:///etc/ok"},
			{Name: "file_missing", Source: "file:///etc/missing"},
			{Name: "vault", Source: "vault://prod/slack/webhook"},
			{Name: "weird", Source: "s3://bucket/key"},
		},
		Steps: []spec.PlanStep{{ID: "a", Tool: "echo:1.0"}, {ID: "b", Image: "sha256:" + strings.Repeat("a", 64)}, {ID: "c", Tool: "echo:1.0"}, {ID: "d", Tool: "fetch:2"}},
	}
}

func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitFailure
}

func TestParseInputs(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "in.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"email_id": "from-file", "limit": 7, "tags": ["x"]}`), 0o600))
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`[1,2]`), 0o600))

	tests := []struct {
		name  string
		file  string
		pairs []string
		want  map[string]any
		code  int
		msg   string
	}{
		{name: "string stays verbatim even if it looks like JSON", pairs: []string{"email_id=007"}, want: map[string]any{"email_id": "007"}},
		{name: "typed values", pairs: []string{"email_id=x", "limit=5", "verbose=true", `tags=["a","b"]`, `meta={"k":1}`},
			want: map[string]any{"email_id": "x", "limit": 5.0, "verbose": true, "tags": []any{"a", "b"}, "meta": map[string]any{"k": 1.0}}},
		{name: "value with equals sign", pairs: []string{"email_id=a=b"}, want: map[string]any{"email_id": "a=b"}},
		{name: "file then pairs win", file: file, pairs: []string{"limit=9"}, want: map[string]any{"email_id": "from-file", "limit": 9.0, "tags": []any{"x"}}},
		{name: "missing required", pairs: []string{"limit=1"}, code: ExitInvalid, msg: `input "email_id" is required`},
		{name: "unknown input", pairs: []string{"email_id=x", "nope=1"}, code: ExitInvalid, msg: `input "nope" is not declared`},
		{name: "number not JSON", pairs: []string{"email_id=x", "limit=five"}, code: ExitInvalid, msg: `want a number`},
		{name: "wrong JSON type", pairs: []string{"email_id=x", "verbose=1"}, code: ExitInvalid, msg: `"verbose" must be a boolean`},
		{name: "no equals", pairs: []string{"email_id"}, code: ExitInvalid, msg: "want name=value"},
		{name: "bad file", file: bad, code: ExitInvalid, msg: "want one JSON object"},
		{name: "missing file", file: filepath.Join(dir, "nope.json"), code: ExitInvalid, msg: "--input-file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseInputs(testPlan(), tc.file, tc.pairs)
			require.Equal(t, tc.code, exitCode(err), "err: %v", err)
			if tc.code != ExitOK {
				require.Contains(t, err.Error(), tc.msg)
				return
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestBuildListQuery(t *testing.T) {
	base := "WorkflowType = 'AgentWorkflow'"
	tests := []struct {
		filters []string
		query   string
		globs   []string
		code    int
	}{
		{query: base},
		{filters: []string{"status=failed"}, query: base + " AND AgentStatus = 'FAILED'"},
		{filters: []string{"status=FAILED", "status=CANCELED"}, query: base + " AND AgentStatus IN ('FAILED', 'CANCELED')"},
		{filters: []string{"spec=daily-tech-news"}, query: base + " AND AgentSpec = 'daily-tech-news'"},
		{filters: []string{"name=news-*"}, query: base + " AND AgentName STARTS_WITH 'news-'"},
		{filters: []string{"name=exact-id"}, query: base + " AND AgentName = 'exact-id'"},
		{filters: []string{"name=news-*", "name=daily-*"}, query: base + " AND (AgentName STARTS_WITH 'news-' OR AgentName STARTS_WITH 'daily-')"},
		{filters: []string{"name=*-prod", "status=RUNNING"}, query: base + " AND AgentStatus = 'RUNNING'", globs: []string{"*-prod"}},
		{filters: []string{"name=n?ws-*"}, query: base, globs: []string{"n?ws-*"}},
		{filters: []string{"spec=a", "status=PENDING", "name=x-*"}, query: base + " AND AgentSpec = 'a' AND AgentStatus = 'PENDING' AND AgentName STARTS_WITH 'x-'"},
		{filters: []string{"status=DONE"}, code: ExitInvalid},
		{filters: []string{"owner=me"}, code: ExitInvalid},
		{filters: []string{"name"}, code: ExitInvalid},
		{filters: []string{"spec=a' OR 1=1"}, code: ExitInvalid},
		{filters: []string{"name=[a-"}, code: ExitInvalid},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.filters, ","), func(t *testing.T) {
			q, err := buildListQuery(tc.filters)
			require.Equal(t, tc.code, exitCode(err), "err: %v", err)
			if tc.code != ExitOK {
				return
			}
			require.Equal(t, tc.query, q.Query)
			require.Equal(t, tc.globs, q.Globs)
		})
	}
	require.True(t, matchAny([]string{"*-prod"}, "news-prod"))
	require.False(t, matchAny([]string{"*-prod"}, "news-dev"))
	require.True(t, matchAny(nil, "anything"))
}

func at(s string) *time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return &t
}

// progressSequence is a run seen at four polls.
func progressSequence() []*workflows.Status {
	return []*workflows.Status{
		{ID: "demo-1", Status: workflows.RunPending, Progress: "0/4"},
		{ID: "demo-1", Status: workflows.RunRunning, Progress: "1/4", StepHistory: []workflows.StepRecord{
			{ID: "fetch", Status: workflows.StepSuccess, Attempts: 1, DurationMS: 1200},
			{ID: "summarize", Status: workflows.StepRunning, Attempts: 2, StartedAt: at("2026-01-01T10:00:00Z")},
		}},
		{ID: "demo-1", Status: workflows.RunRunning, Progress: "2/4", StepHistory: []workflows.StepRecord{
			{ID: "fetch", Status: workflows.StepSuccess, Attempts: 1, DurationMS: 1200},
			{ID: "summarize", Status: workflows.StepFailed, Attempts: 3, DurationMS: 65000, Error: "tool exited 1:\nmodel not found"},
			{ID: "review", Status: workflows.StepWaitingApproval},
		}},
		{ID: "demo-1", Status: workflows.RunFailed, Progress: "4/4", StepHistory: []workflows.StepRecord{
			{ID: "fetch", Status: workflows.StepSuccess, Attempts: 1, DurationMS: 1200, Carried: true},
			{ID: "summarize", Status: workflows.StepFailed, Attempts: 3, DurationMS: 65000, Error: "tool exited 1:\nmodel not found"},
			{ID: "review", Status: workflows.StepCanceled},
			{ID: "publish", Status: workflows.StepSkipped, Reason: workflows.ReasonUpstreamFailed},
		}},
	}
}

func TestProgressGolden(t *testing.T) {
	order := []string{"fetch", "summarize", "review", "publish"}
	now := time.Date(2026, 1, 1, 10, 0, 4, 500e6, time.UTC)
	for _, tty := range []bool{false, true} {
		name := "plain"
		if tty {
			name = "tty"
		}
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			v := newProgressView(&buf, tty, "demo-1", order)
			for _, st := range progressSequence() {
				v.Update(st, now)
				v.Update(st, now) // an unchanged poll prints nothing more
			}
			golden := filepath.Join("testdata", "progress", name+".golden")
			if *update {
				require.NoError(t, os.WriteFile(golden, buf.Bytes(), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			require.Equal(t, string(want), buf.String())
		})
	}
}

func TestFinishWaitExitCodes(t *testing.T) {
	tests := []struct {
		status string
		code   int
	}{
		{workflows.RunSucceeded, ExitOK},
		{workflows.RunFailed, ExitFailure},
		{workflows.RunCanceled, ExitFailure},
		{"TERMINATED", ExitFailure},
	}
	for _, tc := range tests {
		t.Run(tc.status, func(t *testing.T) {
			var out bytes.Buffer
			o := &Options{Output: "table", Streams: Streams{Out: &out, Err: &out}}
			err := finishWait(o, &workflows.Status{ID: "x", Status: tc.status, Outputs: map[string]any{"k": "v"}})
			require.Equal(t, tc.code, exitCode(err))
			require.Contains(t, out.String(), "agent x "+tc.status)
			require.Contains(t, out.String(), `"k": "v"`)
		})
	}
}

func TestEffectiveStatus(t *testing.T) {
	tests := []struct {
		agent string
		ex    enumspb.WorkflowExecutionStatus
		want  string
	}{
		{"", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "PENDING"},
		{"RUNNING", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "RUNNING"},
		{"FAILED", enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, "FAILED"},
		{"RUNNING", enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, "TERMINATED"},
		{"RUNNING", enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT, "TIMED_OUT"},
		{"RUNNING", enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, "CANCELED"},
		{"PENDING", enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, "SUCCEEDED"},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, effectiveStatus(tc.agent, tc.ex), "%s/%s", tc.agent, tc.ex)
	}
}

func TestCheckSecrets(t *testing.T) {
	env := func(k string) (string, bool) { return "v", k == "AF_TEST_SET" }
	stat := func(p string) error {
		if p == "/etc/ok" {
			return nil
		}
		return os.ErrNotExist
	}
	got := checkSecrets(testPlan(), env, stat)
	ok := map[string]bool{}
	for _, c := range got {
		ok[c.Name] = c.OK
	}
	require.Equal(t, map[string]bool{"set_env": true, "unset_env": false, "file_ok": true, "file_missing": false, "vault": true, "weird": false}, ok)
}

func TestToolRefsAndResolveDedup(t *testing.T) {
	require.Equal(t, []string{"echo:1.0", "fetch:2"}, toolRefs(testPlan()))
}

type fakeInspector struct {
	img image.InspectResponse
	err error
}

func (f fakeInspector) ImageInspect(context.Context, string, ...client.ImageInspectOption) (image.InspectResponse, error) {
	return f.img, f.err
}

func TestPinImage(t *testing.T) {
	id := "sha256:" + strings.Repeat("c", 64)
	dig := "sha256:" + strings.Repeat("d", 64)
	tests := []struct {
		name string
		ref  string
		f    fakeInspector
		want string
		code int
	}{
		{name: "local image without repo digest pins the ID", ref: "agentflow/tool-echo:1.0", f: fakeInspector{img: image.InspectResponse{ID: id}}, want: id},
		{name: "repo digest of the same repo wins", ref: "reg.local:5000/echo:1.0", f: fakeInspector{img: image.InspectResponse{ID: id, RepoDigests: []string{"other@" + dig, "reg.local:5000/echo@" + dig}}}, want: "reg.local:5000/echo@" + dig},
		{name: "repo digest of another repo is ignored", ref: "echo:latest", f: fakeInspector{img: image.InspectResponse{ID: id, RepoDigests: []string{"other@" + dig}}}, want: id},
		{name: "unknown image is invalid input", ref: "nope:1", f: fakeInspector{err: errdefs.NotFound(errors.New("no such image"))}, code: ExitInvalid},
		{name: "daemon error", ref: "x:1", f: fakeInspector{err: errors.New("daemon down")}, code: ExitFailure},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pinImage(t.Context(), tc.f, tc.ref)
			require.Equal(t, tc.code, exitCode(err), "err: %v", err)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestVerbsUsageErrors drives the real command tree: invalid invocations
// exit 2 before any server is contacted (the address is unroutable on
// purpose, so reaching the server would fail differently).
func TestVerbsUsageErrors(t *testing.T) {
	dir := t.TempDir()
	badSpec := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(badSpec, []byte("name: x\nversion: 1\nsteps: []\nbogus: 1\n"), 0o600))
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "no spec given"},
		{[]string{"run", "-f", badSpec}, "bad.yaml:"},
		{[]string{"run", "-f", badSpec, "--dry-run", "--preflight-timeout", "0s"}, "--preflight-timeout must be positive"},
		{[]string{"run", "-f", "x.yaml", "extra"}, "unknown command"},
		{[]string{"inspect"}, "accepts 1 arg"},
		{[]string{"list", "--filter", "status=NOPE"}, "want one of"},
		{[]string{"approve", "x"}, "--step is required"},
		{[]string{"logs", "x"}, "--step is required"},
		{[]string{"logs", "x", "--step", "s", "--tail", "-1"}, "must not be negative"},
		{[]string{"tool", "register", "--name", "echo", "--version", "1.0", "--image", "agentflow/tool-echo:1.0"}, "not digest-pinned"},
		{[]string{"tool", "register", "--name", "echo"}, "--image, --version required"},
		{[]string{"tool", "register", "--name", "Bad", "--version", "1", "--image", "sha256:" + strings.Repeat("a", 64)}, "tool name"},
		{[]string{"tool", "show", "BAD:1"}, "tool name"},
		{[]string{"tool", "rm"}, "accepts 1 arg"},
		{[]string{"cancel", "a", "b"}, "accepts 1 arg"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"--address", "127.0.0.1:1"}, tc.args...)
			code := Run(t.Context(), "test", args, Streams{Out: &out, Err: &errb})
			require.Equal(t, ExitInvalid, code, "stderr: %s", errb.String())
			require.Contains(t, errb.String(), tc.want)
		})
	}
}

func TestUnreachableServerExitsOne(t *testing.T) {
	var out, errb bytes.Buffer
	code := Run(t.Context(), "test", []string{"--address", "127.0.0.1:1", "inspect", "x"}, Streams{Out: &out, Err: &errb})
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errb.String(), "cannot reach Temporal at 127.0.0.1:1")
}
