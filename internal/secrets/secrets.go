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
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
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
// vault:// through Vault (unsupported when nil), each only as far as Policy
// allows (the zero Policy allows nothing).
type Sources struct {
	// Policy is the operator's allow-list.
	Policy Policy
	// LookupEnv defaults to os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Vault resolves vault:// sources; nil makes them unsupported.
	Vault Vault
	// MaxFileBytes bounds file:// secrets (default 64 KiB); a secret larger
	// than that is almost certainly the wrong file.
	MaxFileBytes int64
}

const defaultMaxFileBytes = 64 << 10

// Resolve implements Resolver: parse, refuse what no worker may read,
// refuse what this worker's policy does not allow, then read.
func (s *Sources) Resolve(ctx context.Context, source string) (string, error) {
	src, err := ParseSource(source)
	if err != nil {
		return "", err
	}
	if err := Forbidden(src); err != nil {
		return "", err
	}
	switch src.Scheme {
	case "env":
		if err := s.Policy.allowEnv(src); err != nil {
			return "", err
		}
		lookup := s.LookupEnv
		if lookup == nil {
			lookup = os.LookupEnv
		}
		v, ok := lookup(src.Name)
		if !ok {
			return "", fmt.Errorf("%w: environment variable %s is not set on the worker", ErrNotFound, src.Name)
		}
		return v, nil
	case "file":
		root, rel, err := s.Policy.fileRoot(src)
		if err != nil {
			return "", err
		}
		limit := s.MaxFileBytes
		if limit <= 0 {
			limit = defaultMaxFileBytes
		}
		return readInRoot(src, root, "its "+FlagFileRoot, rel, limit)
	default: // vault, by ParseSource
		if err := s.Policy.allowVault(src); err != nil {
			return "", err
		}
		if s.Vault == nil {
			return "", fmt.Errorf("%w: %s: no vault configured on this worker (--vault-dir / AGENTFLOW_VAULT_DIR)", ErrUnsupported, source)
		}
		return s.Vault.Read(ctx, src.Path, src.Key)
	}
}

// readInRoot opens rel inside root without letting a symlink (or "..")
// leave it (os.Root), refuses anything but a regular file on an ordinary
// filesystem, and reads at most limit bytes.
func readInRoot(src Source, root, rootName, rel string, limit int64) (string, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return "", fmt.Errorf("open secret root of %s: %w", src, err)
	}
	defer r.Close()
	// O_NONBLOCK: a FIFO planted in the root must not hang the activity;
	// the type check below refuses it anyway.
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return "", fmt.Errorf("%w: %s: the file does not exist", ErrNotFound, src)
		case strings.Contains(err.Error(), "escapes"):
			return "", fmt.Errorf("%w: %s: the path resolves outside %s (a symlink leaves it)", ErrNotAllowed, src, rootName)
		default:
			return "", fmt.Errorf("open secret file %s: %w", src, err)
		}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("stat secret file %s: %w", src, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s: not a regular file (%s)", ErrNotAllowed, src, fi.Mode().Type())
	}
	if err := checkFilesystem(f); err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrNotAllowed, src, err)
	}
	return readBoundedFile(f, src.String(), limit)
}

// readBoundedFile reads a whole small file and trims surrounding whitespace
// (a trailing newline from `echo x > file` is never part of a secret).
func readBoundedFile(f *os.File, name string, limit int64) (string, error) {
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return "", fmt.Errorf("read secret file %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return "", fmt.Errorf("%w: secret file %s is larger than %d bytes", ErrInvalidSource, name, limit)
	}
	return strings.TrimSpace(string(data)), nil
}

// DirVault is the development Vault: vault://<path>/<key> is the file
// <Dir>/<path>/<key>, trimmed. Paths that would leave Dir are refused.
type DirVault struct {
	Dir string
}

// Read implements Vault. Like file:// secrets, the path is opened inside
// Dir: neither ".." nor a symlink may leave it.
func (v DirVault) Read(_ context.Context, path, key string) (string, error) {
	rel := filepath.FromSlash(path + "/" + key)
	src := Source{Scheme: "vault", Path: path, Key: key, raw: "vault://" + path + "/" + key}
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%w: %s: the path leaves the vault", ErrNotAllowed, src)
	}
	return readInRoot(src, v.Dir, "the vault directory", rel, defaultMaxFileBytes)
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
