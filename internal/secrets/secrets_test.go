package secrets

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSourcesResolve(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("  s3cr3t\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big"), make([]byte, 100), 0o600))
	vault := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(vault, "prod", "slack"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(vault, "prod", "slack", "webhook"), []byte("https://hooks.example/x\n"), 0o600))

	env := map[string]string{"API_KEY": "from-env", "EMPTY": ""}
	s := &Sources{
		Policy:       Policy{EnvAllow: []string{"API_KEY", "EMPTY", "NOPE"}, FileRoots: []string{dir}, VaultPrefixes: []string{"prod"}},
		LookupEnv:    func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Vault:        DirVault{Dir: vault},
		MaxFileBytes: 50,
	}
	require.NoError(t, s.Policy.Check())

	tests := []struct {
		name    string
		source  string
		want    string
		wantErr error
	}{
		{name: "env", source: "env://API_KEY", want: "from-env"},
		{name: "env empty is a value", source: "env://EMPTY", want: ""},
		{name: "env missing", source: "env://NOPE", wantErr: ErrNotFound},
		{name: "file trimmed", source: "file://" + filepath.Join(dir, "token"), want: "s3cr3t"},
		{name: "file with ./ and // is cleaned", source: "file://" + dir + "/.//token", want: "s3cr3t"},
		{name: "file missing", source: "file://" + filepath.Join(dir, "nope"), wantErr: ErrNotFound},
		{name: "file relative", source: "file://relative/path", wantErr: ErrInvalidSource},
		{name: "file too big", source: "file://" + filepath.Join(dir, "big"), wantErr: ErrInvalidSource},
		{name: "vault", source: "vault://prod/slack/webhook", want: "https://hooks.example/x"},
		{name: "vault missing key", source: "vault://prod/slack/other", wantErr: ErrNotFound},
		{name: "vault no key", source: "vault://webhook", wantErr: ErrInvalidSource},
		{name: "vault escape", source: "vault://../../etc/passwd", wantErr: ErrInvalidSource},
		{name: "unknown scheme", source: "http://x/y", wantErr: ErrInvalidSource},
		{name: "no scheme", source: "API_KEY", wantErr: ErrInvalidSource},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Resolve(t.Context(), tc.source)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestZeroPolicyAllowsNothing: a worker started without allow flags
// resolves no secret at all, even ones that exist.
func TestZeroPolicyAllowsNothing(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("zero-policy-value"), 0o600))
	vault := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(vault, "prod", "slack"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(vault, "prod", "slack", "webhook"), []byte("zero-policy-value"), 0o600))
	t.Setenv("H7_ZERO_POLICY", "zero-policy-value")
	s := &Sources{Vault: DirVault{Dir: vault}}
	for _, src := range []string{"env://H7_ZERO_POLICY", "file://" + filepath.Join(dir, "token"), "vault://prod/slack/webhook"} {
		_, err := s.Resolve(t.Context(), src)
		require.ErrorIs(t, err, ErrNotAllowed, src)
		require.Contains(t, err.Error(), src)
		require.Contains(t, err.Error(), "--secret-", "the error names the flag the operator sets")
		require.NotContains(t, err.Error(), "zero-policy-value")
	}
}

// TestHostileSources: what a spec author may try against the most
// permissive sensible policy (every env name, a file root, a vault
// prefix). Every case is refused, names the source and carries no value.
func TestHostileSources(t *testing.T) {
	const canary = "h7-canary-Vx9qZ2-never-in-an-error"
	t.Setenv("H7_CANARY", canary)
	for _, k := range []string{"TEMPORAL_ADDRESS", "VAULT_TOKEN", "AWS_SECRET_ACCESS_KEY", "TEMPORAL_TLS_KEY", "AGENTFLOW_VAULT_DIR", "DOCKER_HOST"} {
		t.Setenv(k, canary)
	}
	t.Setenv("HOME", "/home/"+canary)
	t.Setenv("PATH", os.Getenv("PATH")+":/"+canary)

	base := t.TempDir()
	root := filepath.Join(base, "secrets")
	outside := filepath.Join(base, "outside")
	sibling := filepath.Join(base, "secretsx") // shares the root's name as a string prefix
	for _, d := range []string{root, outside, sibling, filepath.Join(root, "sub")} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	for _, f := range []string{filepath.Join(outside, "key"), filepath.Join(sibling, "key")} {
		require.NoError(t, os.WriteFile(f, []byte(canary), 0o600))
	}
	require.NoError(t, os.Symlink(filepath.Join(outside, "key"), filepath.Join(root, "abs-link")))
	require.NoError(t, os.Symlink("../outside/key", filepath.Join(root, "rel-link")))
	require.NoError(t, os.Symlink("../../outside/key", filepath.Join(root, "sub", "deep-link")))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "dir-link")))
	require.NoError(t, os.Symlink("/proc/self/environ", filepath.Join(root, "environ")))
	require.NoError(t, os.Symlink("/proc/self/root/etc", filepath.Join(root, "procroot")))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(root, "zero")))
	require.NoError(t, os.Mkdir(filepath.Join(root, "adir"), 0o700))
	require.NoError(t, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600))

	vault := filepath.Join(base, "vault")
	require.NoError(t, os.MkdirAll(filepath.Join(vault, "prod", "slack"), 0o700))
	require.NoError(t, os.MkdirAll(filepath.Join(vault, "prod", "slackers"), 0o700))
	require.NoError(t, os.MkdirAll(filepath.Join(vault, "admin"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(vault, "prod", "slackers", "key"), []byte(canary), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(vault, "admin", "root"), []byte(canary), 0o600))
	require.NoError(t, os.Symlink(filepath.Join(outside, "key"), filepath.Join(vault, "prod", "slack", "link")))

	s := &Sources{
		Policy: Policy{EnvAllow: []string{"*"}, FileRoots: []string{root}, VaultPrefixes: []string{"prod/slack"}},
		Vault:  DirVault{Dir: vault},
	}
	require.NoError(t, s.Policy.Check())

	hostile := []struct {
		source string
		want   error
	}{
		{"file:///proc/self/environ", ErrNotAllowed},
		{"file:///proc/1/environ", ErrNotAllowed},
		{"file:///proc/self/root/etc/hostname", ErrNotAllowed},
		{"file:///proc", ErrNotAllowed},
		{"file:///sys/kernel/mm/transparent_hugepage/enabled", ErrNotAllowed},
		{"file:///sys/class/net/lo/address", ErrNotAllowed},
		{"file:///dev/zero", ErrNotAllowed},
		{"file:///dev/mem", ErrNotAllowed},
		{"file:///dev/shm/x", ErrNotAllowed},
		{"file:///etc/hostname", ErrNotAllowed},
		{"file:///etc/shadow", ErrNotAllowed},
		{"file://" + root + "/../outside/key", ErrInvalidSource},
		{"file://" + root + "/sub/../../outside/key", ErrInvalidSource},
		{"file://" + root + "/%2e%2e/outside/key", ErrNotFound}, // taken literally: no such file in the root
		{"file://" + sibling + "/key", ErrNotAllowed},
		{"file://" + root + "/abs-link", ErrNotAllowed},
		{"file://" + root + "/rel-link", ErrNotAllowed},
		{"file://" + root + "/sub/deep-link", ErrNotAllowed},
		{"file://" + root + "/dir-link/key", ErrNotAllowed},
		{"file://" + root + "/environ", ErrNotAllowed},
		{"file://" + root + "/procroot/hostname", ErrNotAllowed},
		{"file://" + root + "/zero", ErrNotAllowed},
		{"file://" + root + "/adir", ErrNotAllowed},
		{"file://" + root + "/fifo", ErrNotAllowed},
		{"file://" + root, ErrNotAllowed},
		{"file://localhost" + root + "/key", ErrInvalidSource},
		{"env://HOME", ErrNotAllowed},
		{"env://PATH", ErrNotAllowed},
		{"env://TEMPORAL_ADDRESS", ErrNotAllowed},
		{"env://TEMPORAL_TLS_KEY", ErrNotAllowed},
		{"env://VAULT_TOKEN", ErrNotAllowed},
		{"env://AWS_SECRET_ACCESS_KEY", ErrNotAllowed},
		{"env://aws_secret_access_key", ErrNotAllowed},
		{"env://AGENTFLOW_VAULT_DIR", ErrNotAllowed},
		{"env://DOCKER_HOST", ErrNotAllowed},
		{"env://LD_PRELOAD", ErrNotAllowed},
		{"env://H7 CANARY", ErrInvalidSource},
		{"vault://prod/slackers/key", ErrNotAllowed},
		{"vault://admin/root", ErrNotAllowed},
		{"vault://prod/slack/../../admin/root", ErrInvalidSource},
		{"vault://prod/slack/./x", ErrInvalidSource},
		{"vault://prod/slack/link", ErrNotAllowed},
	}
	for _, tc := range hostile {
		t.Run(tc.source, func(t *testing.T) {
			v, err := s.Resolve(t.Context(), tc.source)
			require.Error(t, err, "resolved to %q", v)
			require.ErrorIs(t, err, tc.want)
			require.Empty(t, v)
			require.Contains(t, err.Error(), tc.source, "the error names the source")
			require.NotContains(t, err.Error(), canary, "the error carries a value")
		})
	}

	// The permissive policy does resolve what it allows: the table above
	// is refused by the rules, not by a broken resolver.
	require.NoError(t, os.WriteFile(filepath.Join(root, "sub", "key"), []byte("inside\n"), 0o600))
	require.NoError(t, os.Symlink("sub/key", filepath.Join(root, "in-link"))) // Kubernetes secret volumes are such links
	require.NoError(t, os.WriteFile(filepath.Join(vault, "prod", "slack", "webhook"), []byte("hook"), 0o600))
	for src, want := range map[string]string{
		"env://H7_CANARY":             canary,
		"file://" + root + "/sub/key": "inside",
		"file://" + root + "/in-link": "inside",
		"vault://prod/slack/webhook":  "hook",
	} {
		got, err := s.Resolve(t.Context(), src)
		require.NoError(t, err, src)
		require.Equal(t, want, got, src)
	}
}

func TestPolicyCheck(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Symlink("/proc/self", filepath.Join(dir, "proclink")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), nil, 0o600))
	bad := []Policy{
		{EnvAllow: []string{"["}},
		{EnvAllow: []string{""}},
		{FileRoots: []string{"/"}},
		{FileRoots: []string{"/proc"}},
		{FileRoots: []string{"/proc/self/fd"}},
		{FileRoots: []string{"/sys/kernel"}},
		{FileRoots: []string{"/dev"}},
		{FileRoots: []string{filepath.Join(dir, "proclink")}},
		{FileRoots: []string{filepath.Join(dir, "file")}},
		{FileRoots: []string{filepath.Join(dir, "missing")}},
		{FileRoots: []string{"relative/dir"}},
		{VaultPrefixes: []string{""}},
		{VaultPrefixes: []string{"prod/../admin"}},
		{VaultPrefixes: []string{"prod//x"}},
	}
	for _, p := range bad {
		require.Error(t, p.Check(), "%+v", p)
	}
	require.NoError(t, Policy{}.Check())
	require.NoError(t, Policy{EnvAllow: []string{"SLACK_*", "API_KEY"}, FileRoots: []string{dir}, VaultPrefixes: []string{"prod/slack", "/team/x/"}}.Check())
}

func TestWorkerSetting(t *testing.T) {
	for _, n := range []string{"HOME", "PATH", "TEMPORAL_ADDRESS", "TEMPORAL_TLS_KEY", "AGENTFLOW_LOG_DIR", "VAULT_TOKEN", "AWS_ACCESS_KEY_ID", "aws_secret_access_key", "DOCKER_HOST", "KUBECONFIG", "LD_PRELOAD", "GOOGLE_APPLICATION_CREDENTIALS"} {
		require.True(t, WorkerSetting(n), n)
	}
	for _, n := range []string{"SLACK_WEBHOOK", "API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "HOMEPAGE_TOKEN", "MY_PATH"} {
		require.False(t, WorkerSetting(n), n)
	}
}

func TestParseSource(t *testing.T) {
	s, err := ParseSource("vault://prod/slack/webhook")
	require.NoError(t, err)
	require.Equal(t, Source{Scheme: "vault", Path: "prod/slack", Key: "webhook", raw: "vault://prod/slack/webhook"}, s)
	s, err = ParseSource("file:///etc//agentflow/./k")
	require.NoError(t, err)
	require.Equal(t, "/etc/agentflow/k", s.Path)
	s, err = ParseSource("env://SLACK_TOKEN")
	require.NoError(t, err)
	require.Equal(t, "SLACK_TOKEN", s.Name)
	for _, bad := range []string{"", "env://", "env://A-B", "file://", "file:///", "file://rel", "file:///a/../b", "file:///a\x00b", "vault://k", "vault://a//k", "vault://a/../k", "s3://b/k", "ENV"} {
		_, err := ParseSource(bad)
		require.ErrorIs(t, err, ErrInvalidSource, "%q", bad)
	}
}

func TestVaultUnconfigured(t *testing.T) {
	_, err := (&Sources{Policy: Policy{VaultPrefixes: []string{"prod"}}}).Resolve(t.Context(), "vault://prod/slack/webhook")
	require.ErrorIs(t, err, ErrUnsupported)
}

func TestResolveNamesSecretNotValue(t *testing.T) {
	env := map[string]string{"A": "value-a"}
	s := &Sources{Policy: Policy{EnvAllow: []string{"A", "B"}}, LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}

	got, err := Resolve(t.Context(), s, map[string]string{"a": "env://A"})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "value-a"}, got)

	_, err = Resolve(t.Context(), s, map[string]string{"a": "env://A", "b": "env://B"})
	var se *Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, "b", se.Name)
	require.ErrorIs(t, err, ErrNotFound)
	require.NotContains(t, err.Error(), "value-a")
	require.False(t, strings.Contains(err.Error(), "value-a"))
}
