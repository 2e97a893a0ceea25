package temporalconn

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const fullProfile = `
# the keys the Temporal SDK's envconfig reads
[profile.default]
address = "default.example:7233"

[profile.prod]
address = "prod.example:7233"
namespace = "prod-ns"
api_key = "k-1"
unknown_key = "ignored, as by the SDK"

[profile.prod.tls]
client_cert_path = "/c.pem"
client_key_path = "/k.pem"
server_ca_cert_path = "/ca.pem"
server_name = "temporal.internal"
disable_host_verification = true

[profile.prod.grpc_meta]
X_Team = "blue"

[profile.prod.codec]
endpoint = "http://codec"

[profile.inline.tls]
client_cert_data = "CERT"
client_key_data = "KEY"
server_ca_cert_data = "CA"

[profile.tlsonly.tls]

[profile.plain.tls]
disabled = true
server_ca_cert_path = "/ca.pem"
`

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestLoadProfileFormat(t *testing.T) {
	file := writeFile(t, t.TempDir(), "temporal.toml", fullProfile)
	for _, tc := range []struct {
		profile string
		want    Layer
	}{
		{"default", Layer{Address: "default.example:7233"}},
		{"prod", Layer{Address: "prod.example:7233", Namespace: "prod-ns", APIKey: "k-1", TLS: ptr(true),
			Cert: Material{File: "/c.pem"}, Key: Material{File: "/k.pem"}, CA: Material{File: "/ca.pem"},
			ServerName: "temporal.internal", DisableHostVerification: ptr(true), Headers: map[string]string{"x-team": "blue"}}},
		{"inline", Layer{TLS: ptr(true), Cert: Material{Data: "CERT"}, Key: Material{Data: "KEY"}, CA: Material{Data: "CA"}}},
		{"tlsonly", Layer{TLS: ptr(true)}},
		{"plain", Layer{TLS: ptr(false), CA: Material{File: "/ca.pem"}}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			got, err := LoadProfile(ProfileRef{File: file, Name: tc.profile}, nil)
			require.NoError(t, err)
			tc.want.Source = `profile "` + tc.profile + `" in ` + file
			require.Equal(t, tc.want, got)
		})
	}
}

// Which file and which profile: flag > variable > default; only a file or
// profile that was named must exist.
func TestLoadProfileSelection(t *testing.T) {
	cfgHome := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfgHome) // os.UserConfigDir on Linux
	other := writeFile(t, t.TempDir(), "other.toml", `
[profile.default]
address = "other-default:1"
[profile.staging]
address = "other-staging:1"
`)
	missing := filepath.Join(t.TempDir(), "missing.toml")

	address := func(ref ProfileRef, environ ...string) (string, error) {
		l, err := LoadProfile(ref, environ)
		return l.Address, err
	}

	// No default file: no profile, no error.
	got, err := address(ProfileRef{})
	require.NoError(t, err)
	require.Empty(t, got)
	_, err = address(ProfileRef{Name: "prod"})
	require.ErrorContains(t, err, `profile "prod" (--profile): no config file `+filepath.Join(cfgHome, "temporalio", "temporal.toml"))

	writeFile(t, cfgHome, "temporalio/temporal.toml", `
[profile.default]
address = "home-default:1"
[profile.prod]
address = "home-prod:1"
`)
	for _, tc := range []struct {
		name    string
		ref     ProfileRef
		environ []string
		want    string
		err     string
	}{
		{name: "the default file's default profile", want: "home-default:1"},
		{name: "--profile", ref: ProfileRef{Name: "prod"}, want: "home-prod:1"},
		{name: "TEMPORAL_PROFILE", environ: []string{EnvProfile + "=prod"}, want: "home-prod:1"},
		{name: "--profile beats TEMPORAL_PROFILE", ref: ProfileRef{Name: "default"}, environ: []string{EnvProfile + "=prod"}, want: "home-default:1"},
		{name: "TEMPORAL_CONFIG_FILE", environ: []string{EnvConfigFile + "=" + other}, want: "other-default:1"},
		{name: "--config-file beats TEMPORAL_CONFIG_FILE", ref: ProfileRef{File: other}, environ: []string{EnvConfigFile + "=" + missing}, want: "other-default:1"},
		{name: "file and profile named", ref: ProfileRef{File: other, Name: "staging"}, want: "other-staging:1"},
		{name: "a file without the default profile is no profile", ref: ProfileRef{File: writeFile(t, t.TempDir(), "x.toml", "[profile.x]\n")}},
		{name: "an empty file is no profile", ref: ProfileRef{File: writeFile(t, t.TempDir(), "empty.toml", "")}},

		{name: "a named file that is missing", ref: ProfileRef{File: missing}, err: "config file " + missing + " (--config-file): no such file"},
		{name: "a file named by the variable that is missing", environ: []string{EnvConfigFile + "=" + missing}, err: "(" + EnvConfigFile + "): no such file"},
		{name: "a named profile that is missing", ref: ProfileRef{Name: "nope"}, err: `profile "nope" (--profile) is not in ` + filepath.Join(cfgHome, "temporalio", "temporal.toml") + " (it has default, prod)"},
		{name: "a profile named by the variable that is missing", ref: ProfileRef{File: other}, environ: []string{EnvProfile + "=prod"},
			err: `profile "prod" (` + EnvProfile + `) is not in ` + other + " (it has default, staging)"},
		{name: "a directory", ref: ProfileRef{File: cfgHome}, err: "is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := address(tc.ref, tc.environ...)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// A malformed file is an error with file:line:col where the parser knows
// the place, naming the key when the value has the wrong type.
func TestLoadProfileMalformed(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want string
	}{
		{"syntax", "[profile.p\naddress = \"x\"\n", "bad.toml:2:11: expected '.' or ']' to end table name"},
		{"duplicate table", "[profile.p]\n[profile.p]\n", "bad.toml:2:2: Key 'profile.p' has already been defined."},
		{"a number for a string", "[profile.p]\n\naddress = 7233\n", "bad.toml:3:11: profile.p.address: want a string, not an integer"},
		{"a string for a boolean", "[profile.p.tls]\ndisabled = \"yes\"\n", "bad.toml:2:13: profile.p.tls.disabled: want true or false, not a string"},
		{"a grpc_meta value", "[profile.p.grpc_meta]\nx = 1\n", "bad.toml:2:5: profile.p.grpc_meta.x: want a string, not an integer"},
		{"a value for a table", "[profile.p]\ntls = true\n", "bad.toml: line 2 (last key \"profile.p.tls\"): type mismatch"},
		{"a file and inline data", "[profile.p.tls]\nclient_cert_path = \"c\"\nclient_cert_data = \"d\"\n", `bad.toml: profile "p": tls.client_cert_path and tls.client_cert_data: set one, not both`},
		{"a reserved header", "[profile.p.grpc_meta]\ngrpc-timeout = \"1\"\n", `bad.toml: profile "p": grpc_meta: header name "grpc-timeout": grpc- names are reserved`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, dir, "bad.toml", tc.content)
			_, err := LoadProfile(ProfileRef{File: file, Name: "p"}, nil)
			require.ErrorContains(t, err, filepath.Join(dir, tc.want))
		})
	}
	// A broken profile other than the one asked for still breaks the file
	// (it is parsed whole, as by the SDK).
	file := writeFile(t, dir, "other.toml", "[profile.a]\naddress = 1\n[profile.b]\naddress = \"x\"\n")
	_, err := LoadProfile(ProfileRef{File: file, Name: "b"}, nil)
	require.ErrorContains(t, err, "other.toml:2:11: profile.a.address")
}

// Load puts the three layers in order: flags, environment, profile.
func TestLoad(t *testing.T) {
	file := writeFile(t, t.TempDir(), "temporal.toml", fullProfile)
	environ := []string{EnvConfigFile + "=" + file, EnvProfile + "=prod", EnvNamespace + "=env-ns", EnvAPIKey + "="}
	s, err := Load(Sources{Flags: Layer{ServerName: "flag.internal"}, Environ: environ})
	require.NoError(t, err)
	require.Equal(t, Settings{Address: "prod.example:7233", Namespace: "env-ns", Security: Security{
		TLS: true, CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem", ServerName: "flag.internal",
		DisableHostVerification: true, APIKey: "k-1", Headers: map[string]string{"x-team": "blue"},
	}}, s)

	s, err = Load(Sources{NoProfile: true, Environ: environ})
	require.NoError(t, err)
	require.Equal(t, Settings{Address: DefaultAddress, Namespace: "env-ns"}, s, "no profile: environment and defaults")

	_, err = Load(Sources{Profile: ProfileRef{Name: "nope"}, Environ: environ})
	require.ErrorContains(t, err, `profile "nope" (--profile)`)
	_, err = Load(Sources{Environ: append(environ, EnvTLS+"=maybe")})
	require.ErrorContains(t, err, EnvTLS)
}
