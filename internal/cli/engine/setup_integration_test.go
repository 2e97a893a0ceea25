//go:build integration

package engine

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/devserver"
	"github.com/agentflow/agentflow/internal/testenv"
	"github.com/agentflow/agentflow/workflows"
)

// TestSetupOnABareCluster: against a server that has none of agentflow's
// search attributes (like any cluster nobody set up), run explains what is
// missing and how to fix it; setup registers them and says so; run then
// starts; setup again changes nothing; --create-namespace makes a new
// namespace usable, and without it a missing namespace is a clear error.
func TestSetupOnABareCluster(t *testing.T) {
	srv, err := devserver.Start(t.Context(), devserver.Options{Bin: testenv.TemporalBinary(t), Port: testenv.FreePort(t),
		Headless: true, NoSearchAttributes: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop(15 * time.Second) })

	specFile := filepath.Join(t.TempDir(), "one.yaml")
	require.NoError(t, os.WriteFile(specFile, []byte(`name: setup-probe
version: "1.0.0"
steps:
  - id: only
    image: sha256:`+strings.Repeat("5", 64)+`
`), 0o600))
	agentctl := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		args = append([]string{"--address", srv.Address}, args...)
		code := Run(t.Context(), "test", args, Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
		return code, out.String(), errb.String()
	}

	code, _, stderr := agentctl("run", "-f", specFile, "--name", "probe-1")
	require.Equal(t, ExitFailure, code, stderr)
	require.Contains(t, stderr, "agentctl setup", "run names the fix")
	require.Contains(t, stderr, workflows.SearchAttrAgentName)

	code, out, stderr := agentctl("setup")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "namespace default: present")
	for _, sa := range workflows.SearchAttributes {
		require.Contains(t, out, "search attribute "+sa+" (Keyword): added")
	}

	code, out, stderr = agentctl("run", "-f", specFile, "--name", "probe-1")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "probe-1")
	code, _, stderr = agentctl("cancel", "probe-1")
	require.Equal(t, 0, code, stderr)

	code, out, stderr = agentctl("setup", "-o", "json")
	require.Equal(t, 0, code, stderr)
	var rep struct {
		Actions []setupAction `json:"actions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Actions, 1+len(workflows.SearchAttributes))
	for _, a := range rep.Actions {
		require.Equal(t, "present", a.Action, "setup twice changes nothing: %+v", a)
	}

	code, _, stderr = agentctl("--namespace", "agents-new", "setup")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, stderr, "namespace agents-new does not exist")
	require.Contains(t, stderr, "--create-namespace")

	code, out, stderr = agentctl("--namespace", "agents-new", "setup", "--create-namespace", "--retention", "48h")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "namespace agents-new: created, retention 48h0m0s")
	code, out, stderr = agentctl("--namespace", "agents-new", "run", "-f", specFile, "--name", "probe-2")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "probe-2")
	code, _, stderr = agentctl("--namespace", "agents-new", "cancel", "probe-2")
	require.Equal(t, 0, code, stderr)

	code, _, stderr = agentctl("setup", "--retention", "1h")
	require.Equal(t, ExitInvalid, code)
	require.Contains(t, stderr, "--retention")
}

// TestCLIOverMutualTLS: every verb dials through the shared connection
// flags: against a real server behind mutual TLS, the right CA and client
// certificate work (flags or the Temporal CLI's variables); a wrong CA, a
// missing client certificate or plaintext fail with exit 1 and a message
// naming TLS.
func TestCLIOverMutualTLS(t *testing.T) {
	srv, err := devserver.Start(t.Context(), devserver.Options{Bin: testenv.TemporalBinary(t), Port: testenv.FreePort(t), Headless: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop(15 * time.Second) })
	pki := testenv.NewPKI(t, "temporal.test")
	front := testenv.TLSFront(t, srv.Address, pki, true)
	agentctl := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Run(t.Context(), "test", append([]string{"--address", front}, args...),
			Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
		return code, out.String(), errb.String()
	}
	mtls := []string{"--tls-ca", pki.CAFile, "--tls-cert", pki.ClientCert, "--tls-key", pki.ClientKey, "--tls-server-name", "temporal.test"}

	code, out, stderr := agentctl(append(mtls, "setup")...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "search attribute AgentName (Keyword): present")

	t.Run("environment", func(t *testing.T) {
		t.Setenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH", pki.CAFile)
		t.Setenv("TEMPORAL_TLS_CLIENT_CERT_PATH", pki.ClientCert)
		t.Setenv("TEMPORAL_TLS_CLIENT_KEY_PATH", pki.ClientKey)
		t.Setenv("TEMPORAL_TLS_SERVER_NAME", "temporal.test")
		code, _, stderr := agentctl("list")
		require.Equal(t, 0, code, stderr)
	})
	// Everything from a profile of a Temporal config file: no connection
	// flag, no TEMPORAL_* variable but the file's name.
	t.Run("profile", func(t *testing.T) {
		for _, kv := range os.Environ() {
			if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "TEMPORAL_") {
				t.Setenv(k, "")
			}
		}
		pem := func(f string) string {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			return strings.TrimSpace(string(b))
		}
		file := filepath.Join(t.TempDir(), "temporal.toml")
		require.NoError(t, os.WriteFile(file, []byte(`
[profile.files]
address = "`+front+`"
[profile.files.tls]
server_ca_cert_path = "`+pki.CAFile+`"
client_cert_path = "`+pki.ClientCert+`"
client_key_path = "`+pki.ClientKey+`"
server_name = "temporal.test"

[profile.inline]
address = "`+front+`"
[profile.inline.tls]
server_ca_cert_data = """
`+pem(pki.CAFile)+`"""
client_cert_data = """
`+pem(pki.ClientCert)+`"""
client_key_data = """
`+pem(pki.ClientKey)+`"""
server_name = "temporal.test"

[profile.nocert]
address = "`+front+`"
[profile.nocert.tls]
server_ca_cert_path = "`+pki.CAFile+`"
server_name = "temporal.test"
`), 0o600))
		run := func(env map[string]string, args ...string) (int, string) {
			for k, v := range env {
				t.Setenv(k, v)
			}
			var out, errb bytes.Buffer
			code := Run(t.Context(), "test", args, Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
			return code, errb.String()
		}
		code, stderr := run(nil, "--config-file", file, "--profile", "files", "list")
		require.Equal(t, 0, code, stderr)
		code, stderr = run(map[string]string{"TEMPORAL_CONFIG_FILE": file, "TEMPORAL_PROFILE": "inline"}, "setup")
		require.Equal(t, 0, code, stderr)
		code, stderr = run(nil, "--config-file", file, "--profile", "nocert", "list")
		require.Equal(t, ExitFailure, code, "a profile without the client certificate is refused")
		require.Contains(t, stderr, "TLS")
	})
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"wrong CA":       {[]string{"--tls-ca", pki.OtherCAFile, "--tls-cert", pki.ClientCert, "--tls-key", pki.ClientKey, "--tls-server-name", "temporal.test"}, "TLS"},
		"no client cert": {[]string{"--tls-ca", pki.CAFile, "--tls-server-name", "temporal.test"}, "TLS"},
		"plaintext":      {nil, "--tls"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, stderr := agentctl(append(tc.args, "list")...)
			require.Equal(t, ExitFailure, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}
	t.Run("half a key pair is a usage error", func(t *testing.T) {
		code, _, stderr := agentctl("--tls-cert", pki.ClientCert, "list")
		require.Equal(t, ExitInvalid, code)
		require.Contains(t, stderr, "--tls-key")
	})
}
