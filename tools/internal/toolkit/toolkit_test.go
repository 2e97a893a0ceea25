package toolkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type echoIn struct {
	Name  string `json:"name"`
	Count Number `json:"count"`
}

var testTool = Tool{Name: "t", Version: " 1.2\n", Summary: "test", Usage: "Input: {name}"}

func run(t *testing.T, args []string, stdin string, env map[string]string, h Handler[echoIn]) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(t.Context(), testTool, IO{
		Args: args, Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return env[k] },
	}, h)
	return code, out.String(), errb.String()
}

func TestRun(t *testing.T) {
	ok := func(_ context.Context, env Env, in echoIn) (any, error) {
		return map[string]any{"name": in.Name, "count": in.Count, "attempt": env.Attempt, "step": env.StepID}, nil
	}
	tests := []struct {
		name     string
		args     []string
		stdin    string
		env      map[string]string
		h        Handler[echoIn]
		wantCode int
		wantOut  string // exact stdout, or
		wantJSON map[string]any
		wantErr  string // substring of the error field
	}{
		{name: "version prints exactly the version", args: []string{"--version"}, h: ok, wantOut: "1.2\n"},
		{name: "happy path", stdin: `{"name":"x","count":"3"}`, env: map[string]string{"AGENTFLOW_ATTEMPT": "2", "AGENTFLOW_STEP_ID": "s1"}, h: ok,
			wantJSON: map[string]any{"name": "x", "count": 3.0, "attempt": 2.0, "step": "s1"}},
		{name: "empty stdin is an empty object", stdin: "  ", h: ok, wantJSON: map[string]any{"name": "", "count": nil, "attempt": 0.0, "step": ""}},
		{name: "array input refused", stdin: `[1]`, h: ok, wantCode: ExitBadInput, wantErr: "JSON object"},
		{name: "two objects refused", stdin: `{} {}`, h: ok, wantCode: ExitBadInput, wantErr: "more than one"},
		{name: "bad number", stdin: `{"count":"abc"}`, h: ok, wantCode: ExitBadInput, wantErr: "not a number"},
		{name: "handler error", h: func(context.Context, Env, echoIn) (any, error) { return nil, errors.New("boom") }, wantCode: ExitFailure, wantErr: "boom"},
		{name: "handler input error", h: func(context.Context, Env, echoIn) (any, error) { return nil, BadInput("need %s", "x") }, wantCode: ExitBadInput, wantErr: "invalid input: need x"},
		{name: "exit error picks the code", h: func(context.Context, Env, echoIn) (any, error) {
			return nil, &ExitError{Code: 7, Err: errors.New("seven")}
		}, wantCode: 7, wantErr: "seven"},
		{name: "non-object output refused", h: func(context.Context, Env, echoIn) (any, error) { return []int{1}, nil }, wantCode: ExitFailure, wantErr: "not a JSON object"},
		{name: "unknown flag", args: []string{"--bogus"}, h: ok, wantCode: ExitBadInput, wantOut: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, _ := run(t, tt.args, tt.stdin, tt.env, tt.h)
			require.Equal(t, tt.wantCode, code)
			switch {
			case tt.wantJSON != nil:
				var got map[string]any
				require.NoError(t, json.Unmarshal([]byte(out), &got))
				require.Equal(t, tt.wantJSON, got)
			case tt.wantErr != "":
				var got map[string]string
				require.NoError(t, json.Unmarshal([]byte(out), &got), out)
				require.Contains(t, got["error"], tt.wantErr)
			default:
				require.Equal(t, tt.wantOut, out)
			}
			if out != "" {
				require.Equal(t, 1, strings.Count(out, "\n"), "exactly one line of JSON")
			}
		})
	}
}

func TestHelp(t *testing.T) {
	code, out, _ := run(t, []string{"--help"}, "", nil, nil)
	require.Equal(t, 0, code)
	require.Contains(t, out, "t 1.2 — test")
	require.Contains(t, out, "Input: {name}")
}

func TestCleanRel(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "a/b.txt", want: "a/b.txt"},
		{in: "/workspace/a.txt", want: "a.txt"},
		{in: "./a/../b", want: "b"},
		{in: "../x", wantErr: true},
		{in: "a/../../x", wantErr: true},
		{in: "/etc/passwd", wantErr: true},
		{in: "", wantErr: true},
		{in: ".", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := CleanRel(tt.in)
			if tt.wantErr {
				var ie *InputError
				require.ErrorAs(t, err, &ie)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestWorkspaceFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Symlink("/etc", filepath.Join(dir, "link")))
	root, err := Env{Workspace: dir}.OpenWorkspace()
	require.NoError(t, err)
	t.Cleanup(func() { root.Close() })

	require.NoError(t, WriteFile(root, "a/b/c.txt", []byte("hi")))
	got, err := ReadFile(root, "/workspace/a/b/c.txt")
	require.NoError(t, err)
	require.Equal(t, "hi", string(got))

	// A symlink pointing outside is not followed out of the root.
	require.Error(t, WriteFile(root, "link/evil", []byte("x")))
	_, err = ReadFile(root, "link/passwd")
	require.Error(t, err)

	name, err := NextName(root, "out", "m-", ".json")
	require.NoError(t, err)
	require.Equal(t, "out/m-1.json", name)
	require.NoError(t, WriteFile(root, name, nil))
	name, err = NextName(root, "out", "m-", ".json")
	require.NoError(t, err)
	require.Equal(t, "out/m-2.json", name)

	files, err := ListFiles(root)
	require.NoError(t, err)
	require.Equal(t, []string{"a/b/c.txt", "out/m-1.json"}, files)
}
