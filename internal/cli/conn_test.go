package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/temporalconn"
)

// recordingEngine stands in for the engine verbs: each records the
// options it ran with. dev and codec-server carry the annotations the
// real ones do (TestConnectionAnnotations in package engine checks those).
func recordingEngine(got *Options) Constructors {
	c := Constructors{}
	for _, v := range EngineVerbs {
		c[v.Name] = func(o *Options) *cobra.Command {
			cmd := &cobra.Command{Use: v.Name, RunE: func(*cobra.Command, []string) error { *got = *o; return nil }}
			switch v.Name {
			case "dev":
				cmd.Annotations = map[string]string{AnnotationConnection: ConnectionLocal}
			case "codec-server":
				cmd.Annotations = map[string]string{AnnotationConnection: ConnectionNone}
			}
			return cmd
		}
	}
	return c
}

// isolateEnv clears the connection variables and points the default
// config file into a fresh directory, which it returns.
func isolateEnv(t *testing.T) string {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "TEMPORAL_") {
			t.Setenv(k, "")
		}
	}
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	return home
}

// TestConnectionSettings: every engine verb (the worker included) gets
// its settings from one resolution, flag > variable > profile > default;
// a named profile or file that is not there, or a malformed file, is exit
// 2 naming it; verbs without a cluster read no profile.
func TestConnectionSettings(t *testing.T) {
	home := isolateEnv(t)
	require.NoError(t, os.MkdirAll(filepath.Join(home, "temporalio"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, "temporalio", "temporal.toml"), []byte(`
[profile.default]
address = "profile-default:7233"
namespace = "profile-ns"

[profile.cloud]
address = "cloud:7233"
api_key = "profile-key"

[profile.mtls.tls]
server_ca_cert_path = "/p/ca.pem"
client_cert_path = "/p/c.pem"
client_key_path = "/p/k.pem"
server_name = "temporal.internal"
`), 0o600))
	bad := filepath.Join(t.TempDir(), "bad.toml")
	require.NoError(t, os.WriteFile(bad, []byte("[profile.default]\naddress = 7233\n"), 0o600))
	missing := filepath.Join(t.TempDir(), "missing.toml")

	type want struct {
		address, namespace string
		sec                temporalconn.Security
	}
	for _, tc := range []struct {
		name   string
		env    map[string]string
		args   []string
		want   want
		code   int
		stderr string
	}{
		{name: "the default profile", args: []string{"list"}, want: want{"profile-default:7233", "profile-ns", temporalconn.Security{}}},
		{name: "the worker alike", args: []string{"worker"}, want: want{"profile-default:7233", "profile-ns", temporalconn.Security{}}},
		{name: "variables beat the profile", env: map[string]string{"TEMPORAL_ADDRESS": "env:7233"}, args: []string{"list"},
			want: want{"env:7233", "profile-ns", temporalconn.Security{}}},
		{name: "flags beat variables", env: map[string]string{"TEMPORAL_ADDRESS": "env:7233", "TEMPORAL_NAMESPACE": "env-ns"},
			args: []string{"--address", "flag:7233", "list"}, want: want{"flag:7233", "env-ns", temporalconn.Security{}}},
		{name: "--profile", args: []string{"--profile", "cloud", "inspect"},
			want: want{"cloud:7233", temporalconn.DefaultNamespace, temporalconn.Security{TLS: true, APIKey: "profile-key"}}},
		{name: "TEMPORAL_PROFILE", env: map[string]string{"TEMPORAL_PROFILE": "mtls"}, args: []string{"schedule"},
			want: want{temporalconn.DefaultAddress, temporalconn.DefaultNamespace, temporalconn.Security{TLS: true,
				CAFile: "/p/ca.pem", CertFile: "/p/c.pem", KeyFile: "/p/k.pem", ServerName: "temporal.internal"}}},
		{name: "TLS flags beat the profile's, field by field", env: map[string]string{"TEMPORAL_PROFILE": "mtls"},
			args: []string{"--tls-ca", "/f/ca.pem", "--tls-server-name", "flag.internal", "list"},
			want: want{temporalconn.DefaultAddress, temporalconn.DefaultNamespace, temporalconn.Security{TLS: true,
				CAFile: "/f/ca.pem", CertFile: "/p/c.pem", KeyFile: "/p/k.pem", ServerName: "flag.internal"}}},
		{name: "--tls=false beats the profile's TLS", args: []string{"--profile", "mtls", "--tls=false", "list"},
			want: want{temporalconn.DefaultAddress, temporalconn.DefaultNamespace, temporalconn.Security{}}},
		{name: "--tls=false with the profile's API key", args: []string{"--profile", "cloud", "--tls=false", "list"},
			code: ExitInvalid, stderr: "in clear"},
		{name: "--api-key beats the profile's", args: []string{"--profile", "cloud", "--api-key", "flag-key", "list"},
			want: want{"cloud:7233", temporalconn.DefaultNamespace, temporalconn.Security{TLS: true, APIKey: "flag-key"}}},
		{name: "--disable-config-file", env: map[string]string{"TEMPORAL_PROFILE": "cloud"}, args: []string{"--disable-config-file", "list"},
			want: want{temporalconn.DefaultAddress, temporalconn.DefaultNamespace, temporalconn.Security{}}},
		{name: "--config-file", args: []string{"--config-file", missing, "list"}, code: ExitInvalid, stderr: missing + " (--config-file): no such file"},
		{name: "a named profile that is not there", args: []string{"--profile", "nope", "list"}, code: ExitInvalid,
			stderr: `profile "nope" (--profile) is not in`},
		{name: "TEMPORAL_PROFILE naming none", env: map[string]string{"TEMPORAL_PROFILE": "nope"}, args: []string{"worker"}, code: ExitInvalid,
			stderr: `profile "nope" (TEMPORAL_PROFILE)`},
		{name: "a malformed file", env: map[string]string{"TEMPORAL_CONFIG_FILE": bad}, args: []string{"list"}, code: ExitInvalid,
			stderr: bad + ":2:11: profile.default.address: want a string"},
		{name: "a bad variable", env: map[string]string{"TEMPORAL_TLS": "maybe"}, args: []string{"list"}, code: ExitInvalid, stderr: "TEMPORAL_TLS"},
		{name: "dev reads no profile", env: map[string]string{"TEMPORAL_ADDRESS": "127.0.0.1:7333"}, args: []string{"dev"},
			want: want{"127.0.0.1:7333", temporalconn.DefaultNamespace, temporalconn.Security{}}},
		{name: "dev refuses --profile", args: []string{"--profile", "cloud", "dev"}, code: ExitInvalid, stderr: "dev starts its own server"},
		{name: "codec-server reads nothing", env: map[string]string{"TEMPORAL_PROFILE": "nope"}, args: []string{"codec-server"}},
		{name: "validate reads nothing", env: map[string]string{"TEMPORAL_PROFILE": "nope"}, args: []string{"validate", "../../specs/demo.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var got Options
			var out, errb bytes.Buffer
			code := Run(t.Context(), "test", tc.args, Streams{In: strings.NewReader(""), Out: &out, Err: &errb}, recordingEngine(&got))
			require.Equal(t, tc.code, code, "stderr: %s", errb.String())
			require.Contains(t, errb.String(), tc.stderr)
			if tc.code != 0 || tc.want.address == "" {
				return
			}
			require.Equal(t, tc.want, want{got.Address, got.Namespace, got.Security})
		})
	}
}

// The lean build resolves nothing for an engine verb: its flags are
// unparsed there, and the engine it execs does the resolving.
func TestLeanStubLeavesTheConnectionToTheEngine(t *testing.T) {
	isolateEnv(t)
	t.Setenv("TEMPORAL_PROFILE", "nope")
	code, _, stderr := runCLI(t, "list")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, stderr, EngineBinary, "the stub tried to hand over")
	require.NotContains(t, stderr, "profile")
}

// --help never reads the environment into a default: no variable (an
// API key least of all) is printed.
func TestHelpShowsNoVariable(t *testing.T) {
	isolateEnv(t)
	t.Setenv("TEMPORAL_API_KEY", "secret-key-123")
	t.Setenv("TEMPORAL_ADDRESS", "env-address:7233")
	code, stdout, _ := runCLI(t, "--help")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "--profile")
	require.NotContains(t, stdout, "secret-key-123")
	require.NotContains(t, stdout, "env-address")
}
