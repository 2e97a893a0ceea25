package vaultkv

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

// Defaults of Config.
const (
	// DefaultTimeout bounds one request to Vault (a read, or a login).
	DefaultTimeout = 10 * time.Second
	// DefaultMaxRetries: the client retries a read that met a connection
	// error or a 5xx this often (with a short backoff) before the attempt
	// fails as SecretUnavailable and the workflow's infrastructure budget
	// takes over.
	DefaultMaxRetries = 2
	// DefaultAppRoleMount is where the AppRole auth method is mounted.
	DefaultAppRoleMount = "approle"
)

// Config configures a Vault. Exactly one credential is set: TokenFile,
// AppRole, or Token.
type Config struct {
	// Addr is Vault's address, http(s)://host[:port] (--vault-addr, VAULT_ADDR).
	Addr string
	// Namespace is sent as X-Vault-Namespace on every request, the AppRole
	// login included (--vault-namespace, VAULT_NAMESPACE; "" = root).
	Namespace string
	// CACert is a PEM file of the CAs Vault's certificate is checked
	// against instead of the system roots (--vault-ca-cert, VAULT_CACERT).
	CACert string

	// TokenFile holds the token (--vault-token-file): read at start and
	// again after a 403, so a token rotated by Vault Agent or an operator
	// is picked up without a restart.
	TokenFile string
	// AppRole logs in with a role ID and secret ID read from files, at the
	// first read and again after a 403.
	AppRole *AppRole
	// Token is a fixed token (VAULT_TOKEN): nothing to re-read after a 403.
	Token string

	// Timeout bounds each request (0 → DefaultTimeout).
	Timeout time.Duration
	// MaxRetries: the client's retries of a read that met a connection
	// error or a 5xx (0 = none; the worker uses DefaultMaxRetries).
	MaxRetries int

	Logger *slog.Logger
}

// AppRole is an AppRole login (--vault-approle-role-id-file,
// --vault-approle-secret-id-file).
type AppRole struct {
	RoleIDFile   string
	SecretIDFile string
	// Mount of the auth method ("" → DefaultAppRoleMount).
	Mount string
}

// Auth names the credential in use, for the worker's start-up log.
func (c Config) Auth() string {
	switch {
	case c.AppRole != nil:
		return "approle"
	case c.TokenFile != "":
		return "token-file"
	case c.Token != "":
		return "token"
	default:
		return "none"
	}
}

var (
	namespaceRe = regexp.MustCompile(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`)
	mountRe     = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
)

// Check validates the configuration without contacting Vault: the
// address, exactly one credential, its files readable and well-formed, the
// CA file. Errors never contain a token or secret ID.
func (c Config) Check() error {
	if _, err := parseAddr(c.Addr); err != nil {
		return err
	}
	if ns := strings.Trim(c.Namespace, "/"); ns != "" && !namespaceRe.MatchString(ns) {
		return fmt.Errorf("vault namespace %q: want a path such as team-a or team-a/prod", c.Namespace)
	}
	creds := 0
	for _, set := range []bool{c.TokenFile != "", c.AppRole != nil, c.Token != ""} {
		if set {
			creds++
		}
	}
	switch {
	case creds == 0:
		return errors.New("vault: no credential: give --vault-token-file, VAULT_TOKEN, or --vault-approle-role-id-file with --vault-approle-secret-id-file")
	case c.TokenFile != "" && c.AppRole != nil:
		return errors.New("vault: --vault-token-file and --vault-approle-* name two credentials; give one")
	}
	if c.TokenFile != "" {
		if _, err := readCredential(c.TokenFile, "token file"); err != nil {
			return err
		}
	}
	if c.AppRole != nil {
		if c.AppRole.RoleIDFile == "" || c.AppRole.SecretIDFile == "" {
			return errors.New("vault: AppRole needs both --vault-approle-role-id-file and --vault-approle-secret-id-file")
		}
		if m := c.AppRole.Mount; m != "" && !mountRe.MatchString(m) {
			return fmt.Errorf("vault: AppRole mount %q: want one path segment", m)
		}
		if _, err := readCredential(c.AppRole.RoleIDFile, "AppRole role ID file"); err != nil {
			return err
		}
		if _, err := readCredential(c.AppRole.SecretIDFile, "AppRole secret ID file"); err != nil {
			return err
		}
	}
	if c.Token != "" && !credentialRe.MatchString(c.Token) {
		return errors.New("vault: VAULT_TOKEN is not a token (printable characters without spaces)")
	}
	if c.CACert != "" {
		if _, err := loadCA(c.CACert); err != nil {
			return err
		}
	}
	if c.Timeout < 0 || c.MaxRetries < 0 {
		return errors.New("vault: negative timeout or retries")
	}
	return nil
}

// parseAddr accepts http(s)://host[:port] with nothing after the host but
// an optional "/".
func parseAddr(addr string) (*url.URL, error) {
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("vault address %q: want https://host[:port] (or http:// for a local development Vault)", addr)
	}
	return u, nil
}

// Loopback reports whether the address is on this machine, where plain
// http does not send the token over a network.
func loopback(u *url.URL) bool {
	h := u.Hostname()
	return h == "localhost" || h == "127.0.0.1" || h == "::1" || strings.HasPrefix(h, "127.")
}

// maxCredentialBytes bounds a token or AppRole ID file: Vault's tokens are
// under 200 bytes; anything near this is the wrong file.
const maxCredentialBytes = 8 << 10

// credentialRe: a token or ID is printable ASCII without spaces.
var credentialRe = regexp.MustCompile(`^[\x21-\x7e]+$`)

// readCredential reads a token or ID file: a regular file (symlinks
// followed: Kubernetes secret volumes are symlinks), not writable by
// others (anyone could plant a token of their choice), at most
// maxCredentialBytes, one word after trimming. The content never appears
// in an error.
func readCredential(path, what string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("vault %s: %w", what, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("vault %s: %w", what, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("vault %s %s: not a regular file", what, path)
	}
	if fi.Mode().Perm()&0o002 != 0 {
		return "", fmt.Errorf("vault %s %s: mode %04o is writable by anyone; want 0600", what, path, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCredentialBytes+1))
	if err != nil {
		return "", fmt.Errorf("vault %s %s: %w", what, path, err)
	}
	if len(b) > maxCredentialBytes {
		return "", fmt.Errorf("vault %s %s: larger than %d bytes", what, path, maxCredentialBytes)
	}
	v := strings.TrimSpace(string(b))
	switch {
	case v == "":
		return "", fmt.Errorf("vault %s %s: empty", what, path)
	case !credentialRe.MatchString(v):
		return "", fmt.Errorf("vault %s %s: want one line without spaces", what, path)
	}
	return v, nil
}

// loadCA reads a PEM bundle of CA certificates.
func loadCA(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("vault CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("vault CA certificate %s: no PEM certificate in it", path)
	}
	return pool, nil
}
