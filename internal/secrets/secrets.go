// Package secrets resolves the secret sources a spec declares (SPEC §3/§4):
// env://VAR, file:///abs/path and vault://path/key. Resolution happens on the
// worker, inside the step activity, and only for the secrets a step
// references; values never leave the worker except as exec environment.
//
// There is no Vault server here. vault:// goes through the Vault interface;
// the development implementation (DirVault) maps vault://prod/slack/webhook
// to the file <dir>/prod/slack/webhook. A real Vault (KV v2) client plugs in
// behind the same interface without touching callers.
package secrets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Sentinel errors callers branch on.
var (
	// ErrUnsupported: the source's scheme is not env, file or vault, or the
	// needed backend is not configured.
	ErrUnsupported = errors.New("unsupported secret source")
	// ErrNotFound: the source is well-formed but holds no value.
	ErrNotFound = errors.New("secret not found")
	// ErrInvalidSource: the source string is malformed.
	ErrInvalidSource = errors.New("invalid secret source")
)

// Resolver turns a secret source into its value.
//
// Implementations must be safe for concurrent use and must never include
// the value in an error message.
type Resolver interface {
	Resolve(ctx context.Context, source string) (string, error)
}

// Vault reads one key of a secret stored at a path. It is the seam where a
// real HashiCorp Vault client plugs in; DirVault is the development one.
type Vault interface {
	Read(ctx context.Context, path, key string) (string, error)
}

// Sources is the standard Resolver: env:// from a lookup function (the
// worker's environment by default), file:// from the worker's filesystem,
// vault:// through Vault (unsupported when nil).
type Sources struct {
	// LookupEnv defaults to os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Vault resolves vault:// sources; nil makes them unsupported.
	Vault Vault
	// MaxFileBytes bounds file:// secrets (default 64 KiB); a secret larger
	// than that is almost certainly the wrong file.
	MaxFileBytes int64
}

const defaultMaxFileBytes = 64 << 10

// Resolve implements Resolver.
func (s *Sources) Resolve(ctx context.Context, source string) (string, error) {
	scheme, rest, ok := strings.Cut(source, "://")
	if !ok || rest == "" {
		return "", fmt.Errorf("%w: %q: want env://VAR, file:///path or vault://path/key", ErrInvalidSource, source)
	}
	switch scheme {
	case "env":
		lookup := s.LookupEnv
		if lookup == nil {
			lookup = os.LookupEnv
		}
		v, ok := lookup(rest)
		if !ok {
			return "", fmt.Errorf("%w: environment variable %s is not set on the worker", ErrNotFound, rest)
		}
		return v, nil
	case "file":
		return s.readFile(rest)
	case "vault":
		if s.Vault == nil {
			return "", fmt.Errorf("%w: %s: no vault configured on this worker (--vault-dir / AGENTFLOW_VAULT_DIR)", ErrUnsupported, source)
		}
		i := strings.LastIndex(rest, "/")
		if i <= 0 || i == len(rest)-1 {
			return "", fmt.Errorf("%w: %q: want vault://path/key", ErrInvalidSource, source)
		}
		return s.Vault.Read(ctx, rest[:i], rest[i+1:])
	default:
		return "", fmt.Errorf("%w: scheme %q in %q", ErrUnsupported, scheme, source)
	}
}

func (s *Sources) readFile(rest string) (string, error) {
	// file:///abs/path: the URL path after an empty host.
	u, err := url.Parse("file://" + rest)
	if err != nil || u.Host != "" || !filepath.IsAbs(u.Path) {
		return "", fmt.Errorf("%w: file://%s: want file:///absolute/path", ErrInvalidSource, rest)
	}
	limit := s.MaxFileBytes
	if limit <= 0 {
		limit = defaultMaxFileBytes
	}
	return readBounded(u.Path, limit)
}

// readBounded reads a whole small file and trims surrounding whitespace
// (a trailing newline from `echo x > file` is never part of a secret).
func readBounded(path string, limit int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%w: file %s does not exist", ErrNotFound, path)
		}
		return "", fmt.Errorf("open secret file %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return "", fmt.Errorf("read secret file %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return "", fmt.Errorf("%w: secret file %s is larger than %d bytes", ErrInvalidSource, path, limit)
	}
	return strings.TrimSpace(string(data)), nil
}

// DirVault is the development Vault: vault://<path>/<key> is the file
// <Dir>/<path>/<key>, trimmed. Paths that would leave Dir are refused.
type DirVault struct {
	Dir string
}

// Read implements Vault.
func (v DirVault) Read(_ context.Context, path, key string) (string, error) {
	rel := filepath.FromSlash(path + "/" + key)
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%w: vault path %s/%s leaves the vault", ErrInvalidSource, path, key)
	}
	return readBounded(filepath.Join(v.Dir, rel), defaultMaxFileBytes)
}

// Resolve resolves every named source and returns name → value. Errors name
// the secret and its source, never a value; the first failure wins.
func Resolve(ctx context.Context, r Resolver, sources map[string]string) (map[string]string, error) {
	names := make([]string, 0, len(sources))
	for name := range sources {
		names = append(names, name)
	}
	sort.Strings(names) // deterministic: the same secret is reported on every attempt
	out := make(map[string]string, len(sources))
	for _, name := range names {
		src := sources[name]
		v, err := r.Resolve(ctx, src)
		if err != nil {
			return nil, &Error{Name: name, Source: src, Err: err}
		}
		out[name] = v
	}
	return out, nil
}

// Error reports which secret could not be resolved.
type Error struct {
	Name   string
	Source string
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("secret %s (%s): %v", e.Name, e.Source, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }
