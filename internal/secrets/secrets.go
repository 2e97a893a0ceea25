// Package secrets resolves the secret sources a spec declares (SPEC §3/§4):
// env://VAR, file:///abs/path and vault://path/key. Resolution happens on the
// worker, inside the step activity, and only for the secrets a step
// references; values never leave the worker except as exec environment.
//
// vault:// goes through the Vault interface, after the source is mapped to
// its KV v2 location (VaultRef) and that location checked against the
// operator's allow-list: internal/vaultkv reads HashiCorp Vault's KV v2
// (worker --vault-addr); DirVault, for development, maps
// vault://prod/slack/webhook to the file <dir>/prod/slack/webhook
// (worker --dev-vault-dir).
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
	// ErrUnavailable: the store holding the secret (Vault) could not be
	// reached, failed (5xx) or did not answer in time. Unlike the others a
	// retry may fix it: the step activity fails the attempt as an
	// infrastructure failure (failure.SecretUnavailable).
	ErrUnavailable = errors.New("secret store unavailable")
	// ErrDenied: the secret store refused this worker's credentials for
	// the secret (Vault's 403). It is a policy refusal (it wraps
	// ErrNotAllowed): the operator grants the worker's token the path.
	ErrDenied = fmt.Errorf("%w: the secret store denied access", ErrNotAllowed)
)

// Resolver turns a secret source into its value.
//
// Implementations must be safe for concurrent use and must never include
// the value in an error message.
type Resolver interface {
	Resolve(ctx context.Context, source string) (string, error)
}

// Vault reads one key of a KV v2 secret. Sources has mapped the vault://
// source to ref and checked ref against the operator's allow-list before
// Read is called. internal/vaultkv is the HashiCorp Vault implementation,
// DirVault the development one.
//
// Read must be safe for concurrent use, must not keep the value after it
// returns, and its errors wrap ErrNotFound (no such secret, key or version;
// not a string), ErrDenied (the store refused the worker) or
// ErrUnavailable (the store could not answer), never naming a value or a
// credential.
type Vault interface {
	Read(ctx context.Context, ref VaultRef) (string, error)
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
	// VaultMount is the KV v2 mount of the short vault:// form and of
	// short allow-list prefixes ("" → DefaultVaultMount; --vault-kv-mount).
	VaultMount string
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
		// The allow-list is checked on where the source points, not on its
		// spelling: vault://secret/data/admin/x is mount secret, path admin.
		ref := src.VaultRef(s.VaultMount)
		if err := s.Policy.allowVault(src, ref, s.VaultMount); err != nil {
			return "", err
		}
		if s.Vault == nil {
			return "", fmt.Errorf("%w: %s: no vault configured on this worker (--vault-addr, or --dev-vault-dir for development)", ErrUnsupported, source)
		}
		v, err := s.Vault.Read(ctx, ref)
		if err != nil {
			// The Vault names the location it read (ref), this the source
			// the spec wrote.
			return "", fmt.Errorf("%s: %w", source, err)
		}
		return v, nil
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

// DirVault is the development Vault (worker --dev-vault-dir): it holds one
// mount, and the secret at path P, key K of that mount is the file
// <Dir>/P/K, trimmed, so vault://prod/slack/webhook and
// vault://secret/data/prod/slack/webhook both read <Dir>/prod/slack/webhook.
// Paths that would leave Dir are refused.
type DirVault struct {
	Dir string
	// Mount is the one mount it holds ("" → DefaultVaultMount).
	Mount string
}

// Read implements Vault. Like file:// secrets, the path is opened inside
// Dir: neither ".." nor a symlink may leave it.
func (v DirVault) Read(_ context.Context, ref VaultRef) (string, error) {
	mount := v.Mount
	if mount == "" {
		mount = DefaultVaultMount
	}
	src := Source{Scheme: "vault", Path: ref.Path, Key: ref.Key, raw: ref.String()}
	if ref.Mount != mount {
		return "", fmt.Errorf("%w: %s: the development vault holds only mount %s", ErrNotFound, ref, mount)
	}
	rel := filepath.FromSlash(ref.Path + "/" + ref.Key)
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%w: %s: the path leaves the vault", ErrNotAllowed, ref)
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
