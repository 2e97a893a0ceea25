package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/objstore"
)

// Object keeps checkpoints in any objstore.Store (a local directory, an S3
// bucket): <id>.tar holds the content and <id>.json the manifest.
//
// The manifest is written last and only if absent, so it is the commit
// point: a content object without a manifest is invisible (a crashed or
// failed Put) and is overwritten by the next Put of that ID, and of two
// writers of one ID only one commits (the other gets ErrExists). IDs are
// random (the host draws 128 bits), so that race is a safeguard, not a
// protocol: the loser's content may have replaced the winner's, which the
// size and SHA-256 in the manifest then refuse on read, never serve.
//
// Nothing read back is trusted: the manifest is schema-checked with a
// bounded read, and the content reader verifies size and SHA-256 as it goes.
// Whoever can write the storage can still forge a whole checkpoint; Sealed,
// wrapped around this store, is what refuses that.
type Object struct {
	store objstore.Store
	now   func() time.Time
}

var _ Store = (*Object)(nil)

// discardTimeout bounds removing the content of a Put that failed.
const discardTimeout = 10 * time.Second

// NewObject returns a checkpoint store over s (typically
// objstore.Sub(root, "checkpoints")).
func NewObject(s objstore.Store) *Object {
	return &Object{store: s, now: time.Now}
}

// String names the underlying object store, for messages and logs.
func (o *Object) String() string { return o.store.String() }

func contentKey(id exechost.CheckpointID) string  { return string(id) + ".tar" }
func manifestKey(id exechost.CheckpointID) string { return string(id) + ".json" }

// UnavailableError: the object store under the checkpoints could not be
// reached, refused the request or is full. It matches
// exechost.ErrStoreUnavailable (an infrastructure failure, retried) and
// unwraps to the objstore error, whose text it does not repeat: one
// message, "checkpoint store S unavailable: put ckpt-1.tar: no space left
// on device".
type UnavailableError struct {
	Store  string // the object store, as objstore.Store.String names it
	Op     string // put, get, stat, delete, read
	Key    string
	Reason string
	Err    error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("checkpoint store %s unavailable: %s %s: %s", e.Store, e.Op, e.Key, e.Reason)
}

// Is makes it match exechost.ErrStoreUnavailable without going through
// the wrapped error (whose own Is may differ per implementation).
func (e *UnavailableError) Is(target error) bool { return target == exechost.ErrStoreUnavailable }

func (e *UnavailableError) Unwrap() error { return e.Err }

// storeErr translates an objstore error about key into the checkpoint
// vocabulary: a missing object is exechost.ErrNotFound, an unavailable store
// is *UnavailableError, an object that is not a plain file (a symlink, a
// FIFO, a hard link planted in a Dir) is ErrCorruptCheckpoint. Anything else
// keeps its text, prefixed once.
func (o *Object) storeErr(op, key string, err error) error {
	var ue *objstore.UnavailableError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("checkpoint store %s: %s %s: %w", o.store, op, key, err)
	case errors.As(err, &ue):
		return &UnavailableError{Store: o.store.String(), Op: op, Key: key, Reason: ue.Reason, Err: err}
	case errors.Is(err, objstore.ErrUnavailable), errors.Is(err, exechost.ErrStoreUnavailable):
		return &UnavailableError{Store: o.store.String(), Op: op, Key: key, Reason: err.Error(), Err: err}
	case errors.Is(err, objstore.ErrNotFound):
		return fmt.Errorf("%s is not in checkpoint store %s: %w", key, o.store, exechost.ErrNotFound)
	case isNotPlainObject(err):
		return fmt.Errorf("checkpoint store %s: %s: %w: %w", o.store, key, exechost.ErrCorruptCheckpoint, err)
	case errors.Is(err, objstore.ErrInvalidKey):
		return fmt.Errorf("checkpoint store %s: %w: %w", o.store, exechost.ErrPolicy, err)
	default:
		return fmt.Errorf("checkpoint store %s: %s %s: %w", o.store, op, key, err)
	}
}

// Put implements Store.
func (o *Object) Put(ctx context.Context, m Manifest, content io.Reader, seal SealFunc) (Manifest, error) {
	if err := ValidID(m.ID); err != nil {
		return Manifest{}, err
	}
	ck, mk := contentKey(m.ID), manifestKey(m.ID)
	// A cheap early refusal; the IfAbsent manifest write below is the rule.
	if _, err := o.store.Stat(ctx, mk); err == nil {
		return Manifest{}, fmt.Errorf("put checkpoint %s: %w", m.ID, ErrExists)
	} else if !errors.Is(err, objstore.ErrNotFound) {
		return Manifest{}, o.storeErr("stat", mk, err)
	}
	hr := newHashingReader(ctx, content)
	if _, err := o.store.Put(ctx, ck, hr, objstore.PutOptions{}); err != nil {
		if rerr := hr.err; rerr != nil {
			// The content stream failed (the export, a canceled ctx); the
			// store only passed that on. Report the cause.
			return Manifest{}, fmt.Errorf("put checkpoint %s: %w", m.ID, rerr)
		}
		return Manifest{}, o.storeErr("put", ck, err)
	}
	m.SchemaVersion = SchemaVersion
	m.SizeBytes = hr.n
	m.SHA256 = hr.sum()
	if m.CreatedAt.IsZero() {
		m.CreatedAt = o.now().UTC()
	}
	// From here on a failure removes the content, past ctx's end (a
	// canceled Put must not leave the invisible but costly content behind)
	// but bounded (a store that is down must not hold the caller).
	discard := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardTimeout)
		defer cancel()
		_ = o.store.Delete(dctx, ck)
	}
	id := m.ID
	var err error
	if seal != nil {
		if m, err = seal(m); err != nil {
			discard()
			return Manifest{}, fmt.Errorf("put checkpoint %s: %w", id, err)
		}
	}
	b, err := EncodeManifest(m)
	if err != nil {
		discard()
		return Manifest{}, fmt.Errorf("put checkpoint %s: %w", id, err)
	}
	if _, err := o.store.Put(ctx, mk, bytes.NewReader(b), objstore.PutOptions{IfAbsent: true, Size: int64(len(b))}); err != nil {
		if errors.Is(err, objstore.ErrExists) {
			// Another writer committed this ID; the content is theirs now
			// (or ours under their manifest, which its digest refuses).
			return Manifest{}, fmt.Errorf("put checkpoint %s: %w", m.ID, ErrExists)
		}
		discard()
		return Manifest{}, o.storeErr("put", mk, err)
	}
	return m, nil
}

// Stat implements Store.
func (o *Object) Stat(ctx context.Context, id exechost.CheckpointID) (Manifest, error) {
	if err := ValidID(id); err != nil {
		return Manifest{}, err
	}
	mk := manifestKey(id)
	rc, err := o.store.Get(ctx, mk)
	if err != nil {
		return Manifest{}, o.storeErr("get", mk, err)
	}
	defer rc.Close()
	m, err := DecodeManifest(rc) // bounded: maxManifestBytes
	if err != nil {
		if !errors.Is(err, exechost.ErrCorruptCheckpoint) {
			return Manifest{}, o.storeErr("read", mk, err)
		}
		return Manifest{}, fmt.Errorf("checkpoint %s: %w", id, err)
	}
	if m.ID != id {
		return Manifest{}, fmt.Errorf("checkpoint %s: manifest names %s: %w", id, m.ID, exechost.ErrCorruptCheckpoint)
	}
	return m, nil
}

// Get implements Store.
func (o *Object) Get(ctx context.Context, id exechost.CheckpointID) (Manifest, io.ReadCloser, error) {
	m, err := o.Stat(ctx, id)
	if err != nil {
		return Manifest{}, nil, err
	}
	ck := contentKey(id)
	rc, err := o.store.Get(ctx, ck)
	if errors.Is(err, objstore.ErrNotFound) {
		return Manifest{}, nil, fmt.Errorf("checkpoint %s: content missing: %w", id, exechost.ErrCorruptCheckpoint)
	}
	if err != nil {
		return Manifest{}, nil, o.storeErr("get", ck, err)
	}
	r := &storeReader{o: o, key: ck, rc: rc}
	return m, &verifyingReader{hr: newHashingReader(ctx, r), closer: rc, m: m}, nil
}

// Delete implements Store. The manifest goes first so a half-deleted
// checkpoint is invisible rather than corrupt.
func (o *Object) Delete(ctx context.Context, id exechost.CheckpointID) error {
	if err := ValidID(id); err != nil {
		return err
	}
	for _, k := range []string{manifestKey(id), contentKey(id)} {
		if err := o.store.Delete(ctx, k); err != nil && !errors.Is(err, objstore.ErrNotFound) {
			return o.storeErr("delete", k, err)
		}
	}
	return nil
}

// storeReader translates the errors of an object being read (a store gone
// mid-download) into the checkpoint vocabulary; io.EOF passes unchanged.
type storeReader struct {
	o   *Object
	key string
	rc  io.ReadCloser
}

func (r *storeReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = r.o.storeErr("read", r.key, err)
	}
	return n, err
}

// isNotPlainObject reports an object a Dir refused to open because it is
// not a plain single-link file.
func isNotPlainObject(err error) bool {
	return errors.Is(err, objstore.ErrNotRegular)
}
