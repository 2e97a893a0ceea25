package temporalconn

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/testenv"
)

func TestEnabledAndCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		s       Security
		enabled bool
		err     string
	}{
		{"plaintext", Security{}, false, ""},
		{"tls", Security{TLS: true}, true, ""},
		{"a CA implies TLS", Security{CAFile: "ca.pem"}, true, ""},
		{"a server name implies TLS", Security{ServerName: "x"}, true, ""},
		{"an API key implies TLS", Security{APIKey: "k"}, true, ""},
		{"cert without key", Security{CertFile: "c.pem"}, true, "go together"},
		{"key without cert", Security{KeyFile: "k.pem"}, true, "go together"},
		{"key with a line break", Security{APIKey: "k\nX-Other: 1"}, true, "line break"},
		{"inline cert and key", Security{CertData: "c", KeyData: "k"}, true, ""},
		{"cert file, inline key", Security{CertFile: "c.pem", KeyData: "k"}, true, ""},
		{"inline cert without key", Security{CertData: "c"}, true, "go together"},
		{"CA file and inline", Security{CAFile: "ca.pem", CAData: "x"}, true, "both as a file and inline"},
		{"headers alone are not TLS", Security{Headers: map[string]string{"x-team": "a"}}, false, ""},
		{"a reserved header", Security{Headers: map[string]string{"grpc-timeout": "1"}}, false, "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.enabled, tc.s.Enabled())
			err := tc.s.Check()
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestTLSConfigFiles(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	require.NoError(t, os.WriteFile(notPEM, []byte("hello"), 0o600))

	cfg, err := Security{}.TLSConfig()
	require.NoError(t, err)
	require.Nil(t, cfg, "plaintext: no TLS config")

	cfg, err = Security{TLS: true, ServerName: "temporal.internal"}.TLSConfig()
	require.NoError(t, err)
	require.Equal(t, "temporal.internal", cfg.ServerName)
	require.Nil(t, cfg.RootCAs, "system roots by default")

	_, err = Security{CAFile: filepath.Join(dir, "missing.pem")}.TLSConfig()
	require.ErrorContains(t, err, "missing.pem")
	_, err = Security{CAFile: notPEM}.TLSConfig()
	require.ErrorContains(t, err, "no PEM certificate")
	_, err = Security{CertFile: notPEM, KeyFile: notPEM}.TLSConfig()
	require.ErrorContains(t, err, "client certificate")
}

func TestExplain(t *testing.T) {
	require.NoError(t, Security{}.Explain(nil))
	for _, tc := range []struct {
		s    Security
		err  string
		want string
	}{
		{Security{CAFile: "x"}, "rpc error: tls: failed to verify certificate: x509: certificate signed by unknown authority", "--tls-ca"},
		{Security{TLS: true}, "remote error: tls: certificate required", "--tls-cert"},
		{Security{}, "connection closed before server preface received: EOF", "--tls"},
		{Security{CAFile: "x"}, "failed reaching server: write tcp 127.0.0.1:1->127.0.0.1:2: write: broken pipe", "--tls-cert"},
		{Security{CAFile: "x"}, "read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer", "TLS"},
		{Security{}, "connection refused", "connection refused"},
	} {
		got := tc.s.Explain(errors.New(tc.err)).Error()
		require.Contains(t, got, tc.want)
		require.True(t, strings.HasSuffix(got, tc.err), "the cause is kept: %s", got)
	}
}

// Inline PEM (a profile's *_data, the *_DATA variables) works like the
// files, alone or mixed with them; a message never quotes inline bytes.
func TestTLSConfigInline(t *testing.T) {
	pki := testenv.NewPKI(t, "temporal.test")
	read := func(f string) string {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		return string(b)
	}
	for name, s := range map[string]Security{
		"inline":              {CAData: read(pki.CAFile), CertData: read(pki.ClientCert), KeyData: read(pki.ClientKey)},
		"cert file, key data": {CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyData: read(pki.ClientKey)},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := s.TLSConfig()
			require.NoError(t, err)
			require.NotNil(t, cfg.RootCAs)
			require.Len(t, cfg.Certificates, 1)
		})
	}
	_, err := Security{CAData: "not pem"}.TLSConfig()
	require.ErrorContains(t, err, "TLS CA (inline): no PEM certificate")
	_, err = Security{CertData: read(pki.ClientCert), KeyData: "secret-not-pem"}.TLSConfig()
	require.ErrorContains(t, err, "key (inline)")
	require.NotContains(t, err.Error(), "secret-not-pem")
}
