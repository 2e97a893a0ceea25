// Package temporalconn holds agentflow's connection settings for Temporal:
// address, namespace, TLS, mutual TLS, an API key, gRPC headers; where
// they come from (flags, the environment, a profile of the Temporal
// config file, in that order: layer.go, env.go, profile.go), their
// checks, the TLS configuration and the explanation of a failed dial; the
// one place the CLI and the worker learn them. Names follow the Temporal
// CLI's, so a shell or a config file set up for `temporal` works for
// agentctl too. It links no Temporal package (the lean agentctl parses
// these flags); sdkconn applies them to SDK options.
package temporalconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Security is how a client authenticates the cluster and itself.
type Security struct {
	// TLS turns TLS on; any other field implies it (Enabled).
	TLS bool
	// CAFile or CAData (PEM inline, not both): roots that verify the
	// server (default: the system's).
	CAFile, CAData string
	// CertFile/CertData and KeyFile/KeyData: the client certificate of
	// mutual TLS, each a file or PEM inline (a certificate and a key, or
	// neither).
	CertFile, CertData string
	KeyFile, KeyData   string
	// ServerName overrides the name verified in the server's certificate
	// (and sent as SNI): for a server reached by an address its
	// certificate does not name.
	ServerName string
	// DisableHostVerification accepts any server certificate: tests only.
	DisableHostVerification bool
	// APIKey is sent as a bearer token (Temporal Cloud API keys); it
	// implies TLS, since a key sent in clear is a key given away.
	APIKey string
	// Headers: gRPC metadata sent with every request (a profile's
	// grpc_meta, TEMPORAL_GRPC_META_*); they do not imply TLS.
	Headers map[string]string
}

// Enabled reports whether the connection uses TLS: asked for, or implied
// by a CA, a client certificate, a server name or an API key.
func (s Security) Enabled() bool {
	return s.TLS || s.CAFile != "" || s.CAData != "" || s.CertFile != "" || s.CertData != "" ||
		s.KeyFile != "" || s.KeyData != "" || s.ServerName != "" || s.DisableHostVerification || s.APIKey != ""
}

// Check validates the settings without reading files: what a flag parser
// reports as a usage error.
func (s Security) Check() error {
	for _, pair := range [][2]string{{s.CAFile, s.CAData}, {s.CertFile, s.CertData}, {s.KeyFile, s.KeyData}} {
		if pair[0] != "" && pair[1] != "" {
			return errors.New("a TLS certificate or key is given both as a file and inline: give one")
		}
	}
	if (s.CertFile == "" && s.CertData == "") != (s.KeyFile == "" && s.KeyData == "") {
		return errors.New("--tls-cert and --tls-key go together (mutual TLS needs both; so do a profile's tls.client_cert_* and tls.client_key_*)")
	}
	if strings.ContainsAny(s.APIKey, "\r\n") {
		return errors.New("the API key contains a line break")
	}
	for k, v := range s.Headers {
		if err := checkHeader(k, v); err != nil {
			return err
		}
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
	if s.CAFile != "" || s.CAData != "" {
		pem, name, err := readMaterial(s.CAFile, s.CAData)
		if err != nil {
			return nil, fmt.Errorf("TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA %s: no PEM certificate in it", name)
		}
		cfg.RootCAs = pool
	}
	if s.CertFile != "" || s.CertData != "" {
		certPEM, certName, err := readMaterial(s.CertFile, s.CertData)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate: %w", err)
		}
		keyPEM, keyName, err := readMaterial(s.KeyFile, s.KeyData)
		if err != nil {
			return nil, fmt.Errorf("TLS client key: %w", err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate %s / key %s: %w", certName, keyName, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// readMaterial returns a PEM file's bytes or the inline PEM, and what to
// call it in a message (never the inline bytes: a key is a secret).
func readMaterial(file, data string) ([]byte, string, error) {
	if file == "" {
		return []byte(data), "(inline)", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, file, err
	}
	return b, file, nil
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
