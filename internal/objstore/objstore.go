// Package objstore is agentflow's one object-store abstraction: a flat
// key → bytes store that checkpoints, step logs and attempt results are
// kept in. Two implementations: Dir (a local directory, the default) and
// S3 (any S3-compatible server: AWS S3, MinIO). Callers take a Store and a
// key prefix (Sub); they never know which one they have.
//
// Whoever else can write the storage (a shared bucket, a directory) is not
// trusted: a Store only guarantees that an object is either absent or
// completely written. Authenticity is the caller's (checkpoint.Sealed signs
// manifests; result records are signed the same way).
package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/agentflow/agentflow/exechost"
)

// Store keeps objects by key. Implementations are safe for concurrent use.
type Store interface {
	// Put stores the whole of r under key. The object becomes visible only
	// once completely written (temp file + rename; an S3 PUT or a completed
	// multipart upload): a failed or canceled Put leaves nothing under key.
	// With IfAbsent, a key that already exists fails with ErrExists and
	// nothing is written (atomic: of two concurrent Puts one wins).
	Put(ctx context.Context, key string, r io.Reader, opts PutOptions) (Info, error)
	// Get opens the object; a missing key is ErrNotFound. The reader fails
	// with ErrUnavailable when the store goes away mid-read.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Stat describes the object; a missing key is ErrNotFound.
	Stat(ctx context.Context, key string) (Info, error)
	// List returns the objects whose keys start with prefix, sorted by key.
	// A prefix is compared byte-wise: "a/b" matches "a/b/c" and "a/bc".
	List(ctx context.Context, prefix string) ([]Info, error)
	// Delete removes the object; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// DeletePrefix removes every object under prefix, which names whole
	// segments ("agent/run/": non-empty, ending in '/'; anything else is
	// ErrInvalidKey), and returns the objects it removed. A Dir also
	// removes the directories it leaves empty, which Delete does not (a
	// writer may be about to use them): call it only on prefixes nobody
	// writes any more (retention, internal/gc). On an error it returns
	// what it removed before it.
	DeletePrefix(ctx context.Context, prefix string) ([]Info, error)
	// String names the store for messages ("dir /var/lib/agentflow",
	// "s3://bucket/prefix").
	String() string
}

// PutOptions modify a Put.
type PutOptions struct {
	// IfAbsent: fail with ErrExists instead of replacing an object.
	IfAbsent bool
	// Size is the content length when known (-1 or 0 = unknown); S3 uses it
	// to choose a single PUT over a multipart upload.
	Size int64
	// NoSync: the object need not survive a crash of the machine (a power
	// loss, a kernel panic; a killed process loses nothing either way).
	// A store on local disk then skips the two fsyncs of a Put (the
	// object's and its directory's), which wait for the disk; after such a
	// crash the object may be missing, empty or cut short. Readers of such
	// objects must take that (step logs do: their reader is built for a
	// bucket others write). Remote stores ignore it.
	NoSync bool
}

// Info describes one stored object.
type Info struct {
	Key     string
	Size    int64
	ModTime time.Time
}

var (
	// ErrNotFound: no object under the key.
	ErrNotFound = errors.New("object not found")
	// ErrExists: Put with IfAbsent found the key taken.
	ErrExists = errors.New("object already exists")
	// ErrInvalidKey: the key breaks the key rule (CheckKey).
	ErrInvalidKey = errors.New("invalid object key")
	// ErrUnavailable: the store cannot be reached, refused the request
	// (credentials, throttling) or is out of space. It matches
	// exechost.ErrStoreUnavailable, so an attempt that hits it fails as
	// an infrastructure error (StoreUnavailable, retried).
	ErrUnavailable = fmt.Errorf("object store unavailable: %w", exechost.ErrStoreUnavailable)
)

// UnavailableError is a store failure that is not about the key: the
// store is down, full or refusing. Reason is one short phrase ("no space
// left on device", "connection refused", "access denied").
type UnavailableError struct {
	Store  string // Store.String()
	Op     string // "put", "get", "stat", "list", "delete"
	Key    string
	Reason string
	Err    error // the underlying error, for errors.As; not repeated in Error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("object store %s unavailable: %s %s: %s", e.Store, e.Op, e.Key, e.Reason)
}

// Is makes every *UnavailableError match ErrUnavailable and
// exechost.ErrStoreUnavailable.
func (e *UnavailableError) Is(target error) bool {
	return target == ErrUnavailable || target == exechost.ErrStoreUnavailable
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// maxKeyLen bounds a key (S3 allows 1024 bytes; a Dir path must stay under
// PATH_MAX with its root).
const maxKeyLen = 512

// CheckKey is the one key rule: 1–512 bytes of slash-separated segments,
// each non-empty, of [A-Za-z0-9._%=-] only, not starting with '.' (so no
// "." or "..", and no collision with a Dir's temp files). Every
// implementation refuses any other key with ErrInvalidKey, so a key can
// never climb out of a Dir or a prefix.
func CheckKey(key string) error {
	if key == "" || len(key) > maxKeyLen {
		return fmt.Errorf("%w: %d bytes (1–%d)", ErrInvalidKey, len(key), maxKeyLen)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" {
			return fmt.Errorf("%w: %q has an empty segment", ErrInvalidKey, key)
		}
		if seg[0] == '.' {
			return fmt.Errorf("%w: %q has a segment starting with '.'", ErrInvalidKey, key)
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
				c == '.' || c == '_' || c == '%' || c == '=' || c == '-'
			if !ok {
				return fmt.Errorf("%w: %q contains %q", ErrInvalidKey, key, c)
			}
		}
	}
	return nil
}

// checkSegmentPrefix is DeletePrefix's rule: whole segments, ending in '/'.
func checkSegmentPrefix(prefix string) error {
	if !strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("%w: prefix %q must end in '/'", ErrInvalidKey, prefix)
	}
	return CheckKey(strings.TrimSuffix(prefix, "/"))
}

// deleteListed deletes the listed objects one by one: the DeletePrefix of
// stores without a batch delete.
func deleteListed(ctx context.Context, s Store, prefix string) ([]Info, error) {
	infos, err := s.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	for i, in := range infos {
		if err := s.Delete(ctx, in.Key); err != nil {
			return infos[:i], err
		}
	}
	return infos, nil
}

// checkPrefix accepts "" or a key-shaped prefix that may end in '/'.
func checkPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return CheckKey(strings.TrimSuffix(prefix, "/"))
}

// Sub is a view of s under prefix: keys given to it are stored as
// prefix+"/"+key, and List returns keys with the prefix removed. Sub of a
// Sub nests.
func Sub(s Store, prefix string) Store {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return s
	}
	return &sub{s: s, prefix: prefix + "/"}
}

type sub struct {
	s      Store
	prefix string
}

func (p *sub) key(k string) (string, error) {
	if err := CheckKey(k); err != nil {
		return "", err
	}
	return p.prefix + k, nil
}

func (p *sub) Put(ctx context.Context, key string, r io.Reader, opts PutOptions) (Info, error) {
	k, err := p.key(key)
	if err != nil {
		return Info{}, err
	}
	info, err := p.s.Put(ctx, k, r, opts)
	info.Key = key
	return info, err
}

func (p *sub) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	k, err := p.key(key)
	if err != nil {
		return nil, err
	}
	return p.s.Get(ctx, k)
}

func (p *sub) Stat(ctx context.Context, key string) (Info, error) {
	k, err := p.key(key)
	if err != nil {
		return Info{}, err
	}
	info, err := p.s.Stat(ctx, k)
	info.Key = key
	return info, err
}

func (p *sub) List(ctx context.Context, prefix string) ([]Info, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	infos, err := p.s.List(ctx, p.prefix+prefix)
	for i := range infos {
		infos[i].Key = strings.TrimPrefix(infos[i].Key, p.prefix)
	}
	return infos, err
}

func (p *sub) Delete(ctx context.Context, key string) error {
	k, err := p.key(key)
	if err != nil {
		return err
	}
	return p.s.Delete(ctx, k)
}

func (p *sub) DeletePrefix(ctx context.Context, prefix string) ([]Info, error) {
	if err := checkSegmentPrefix(prefix); err != nil {
		return nil, err
	}
	infos, err := p.s.DeletePrefix(ctx, p.prefix+prefix)
	for i := range infos {
		infos[i].Key = strings.TrimPrefix(infos[i].Key, p.prefix)
	}
	return infos, err
}

func (p *sub) String() string { return p.s.String() + "/" + strings.TrimSuffix(p.prefix, "/") }

// sortInfos sorts by key, for List implementations.
func sortInfos(infos []Info) {
	slices.SortFunc(infos, func(a, b Info) int { return strings.Compare(a.Key, b.Key) })
}
