// Package temporalconn holds agentflow's connection settings for a Temporal
// cluster that is not a plaintext dev server (TLS, mutual TLS, an API key):
// their environment names, checks, the TLS configuration and the
// explanation of a failed dial; the one place the CLI and the worker learn
// them. Environment names follow the Temporal CLI's, so a shell set up for
// `temporal` works for agentctl too. It links no Temporal package (the lean
// agentctl parses these flags); sdkconn applies them to SDK options.
package temporalconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Security is how a client authenticates the cluster and itself.
type Security struct {
	// TLS turns TLS on; any other field implies it (Enabled).
	TLS bool
	// CAFile: PEM roots that verify the server (default: the system's).
	CAFile string
	// CertFile and KeyFile: the client certificate of mutual TLS (both or
	// neither).
	CertFile, KeyFile string
	// ServerName overrides the name verified in the server's certificate
	// (and sent as SNI): for a server reached by an address its
	// certificate does not name.
	ServerName string
	// DisableHostVerification accepts any server certificate: tests only.
	DisableHostVerification bool
	// APIKey is sent as a bearer token (Temporal Cloud API keys); it
	// implies TLS, since a key sent in clear is a key given away.
	APIKey string
}

// Environment names, as the Temporal CLI spells them.
const (
	EnvTLS                  = "TEMPORAL_TLS"
	EnvTLSCA                = "TEMPORAL_TLS_CA_PATH"
	EnvTLSCert              = "TEMPORAL_TLS_CERT_PATH"
	EnvTLSKey               = "TEMPORAL_TLS_KEY_PATH"
	EnvTLSServerName        = "TEMPORAL_TLS_SERVER_NAME"
	EnvTLSDisableHostVerify = "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION"
	EnvAPIKey               = "TEMPORAL_API_KEY"
)

// FromEnv reads the Temporal CLI's variables (getenv is os.Getenv in
// production); an unparsable boolean is an error naming the variable.
func FromEnv(getenv func(string) string) (Security, error) {
	var s Security
	var err error
	if s.TLS, err = envBool(getenv, EnvTLS); err != nil {
		return s, err
	}
	if s.DisableHostVerification, err = envBool(getenv, EnvTLSDisableHostVerify); err != nil {
		return s, err
	}
	s.CAFile = getenv(EnvTLSCA)
	s.CertFile = getenv(EnvTLSCert)
	s.KeyFile = getenv(EnvTLSKey)
	s.ServerName = getenv(EnvTLSServerName)
	s.APIKey = getenv(EnvAPIKey)
	return s, nil
}

func envBool(getenv func(string) string, name string) (bool, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want true or false", name, v)
	}
	return b, nil
}

// Enabled reports whether the connection uses TLS: asked for, or implied
// by a CA, a client certificate, a server name or an API key.
func (s Security) Enabled() bool {
	return s.TLS || s.CAFile != "" || s.CertFile != "" || s.KeyFile != "" || s.ServerName != "" ||
		s.DisableHostVerification || s.APIKey != ""
}

// Check validates the settings without reading files: what a flag parser
// reports as a usage error.
func (s Security) Check() error {
	if (s.CertFile == "") != (s.KeyFile == "") {
		return errors.New("--tls-cert and --tls-key go together (mutual TLS needs both)")
	}
	if strings.ContainsAny(s.APIKey, "\r\n") {
		return errors.New("the API key contains a line break")
	}
	return nil
}

// TLSConfig is the client TLS configuration, nil when TLS is off. Files
// are read here, so a missing or bad file is reported before any dial,
// naming it.
func (s Security) TLSConfig() (*tls.Config, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	if !s.Enabled() {
		return nil, nil
	}
	return s.tlsConfig()
}

func (s Security) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         s.ServerName,
		InsecureSkipVerify: s.DisableHostVerification, //nolint:gosec // opt-in, documented as tests only
	}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA %s: no PEM certificate in it", s.CAFile)
		}
		cfg.RootCAs = pool
	}
	if s.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate %s / key %s: %w", s.CertFile, s.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// IsCertificateFailure reports a dial error that is a certificate or TLS
// alert failure for certain: waiting does not fix it. (A hang-up right
// after the handshake may be one too, or a server still starting.)
func IsCertificateFailure(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "x509:") || strings.Contains(msg, "tls:")
}

// Explain adds what to check to a dial error: a TLS handshake failure
// names TLS and the setting that usually causes it, so a wrong CA or a
// plaintext client against a TLS server is obvious from the message.
func (s Security) Explain(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "remote error: tls:"):
		// The server refused us: usually no or an untrusted client
		// certificate.
		return fmt.Errorf("TLS: the server refused the connection (mutual TLS needs --tls-cert and --tls-key from a CA it trusts): %w", err)
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "certificate"):
		return fmt.Errorf("TLS: the server's certificate was not accepted (check --tls-ca and --tls-server-name): %w", err)
	case strings.Contains(msg, "tls:") || strings.Contains(msg, "handshake"):
		return fmt.Errorf("TLS handshake failed (mutual TLS needs --tls-cert and --tls-key; check --tls-ca): %w", err)
	case !s.Enabled() && closedEarly(msg):
		return fmt.Errorf("the server closed a plaintext connection: if it serves TLS, connect with --tls: %w", err)
	case s.Enabled() && closedEarly(msg):
		// With TLS 1.3 the client's handshake is done before the server
		// has checked the client's certificate, so a refusal may arrive
		// as the server hanging up rather than as a TLS alert.
		return fmt.Errorf("TLS: the server hung up right after the handshake (it may require a client certificate: --tls-cert and --tls-key from a CA it trusts; or it does not serve TLS): %w", err)
	}
	return err
}

// closedEarly: the connection ended under the client's feet.
func closedEarly(msg string) bool {
	for _, m := range []string{"connection reset", "broken pipe", "EOF", "frame", "http2"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}
