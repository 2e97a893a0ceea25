package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/agentflow/agentflow/exechost"
)

// Local stores checkpoints in one directory: <id>.tar holds the content and
// <id>.json the manifest. The manifest is written last (temp file + rename),
// so it is the commit point: a content file without a manifest is invisible
// and overwritten by the next Put of that ID.
//
// Reads are hardened against whoever else can write the directory: only
// names derived from a valid ID are opened, with O_NOFOLLOW, and only a
// regular file with a single link is read (a symlink, a hard link to a file
// elsewhere, a FIFO or a directory is a corrupt checkpoint).
type Local struct {
	dir string
	now func() time.Time
}

var _ Store = (*Local)(nil)

// NewLocal creates dir if needed and returns a store rooted there. dir is
// the operator's choice; it is resolved once, so a symlink in its path is
// followed here and never again.
func NewLocal(dir string) (*Local, error) {
	if dir == "" {
		return nil, errors.New("checkpoint dir: empty path")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint dir: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint dir: %w", err)
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, fmt.Errorf("checkpoint dir: %w", err)
	}
	return &Local{dir: abs, now: time.Now}, nil
}

// Dir is the directory the store writes to.
func (l *Local) Dir() string { return l.dir }

func (l *Local) paths(id exechost.CheckpointID) (content, manifest string, err error) {
	if err := ValidID(id); err != nil {
		return "", "", err
	}
	return filepath.Join(l.dir, string(id)+".tar"), filepath.Join(l.dir, string(id)+".json"), nil
}

// Put implements Store.
func (l *Local) Put(ctx context.Context, m Manifest, content io.Reader, seal SealFunc) (Manifest, error) {
	contentPath, manifestPath, err := l.paths(m.ID)
	if err != nil {
		return Manifest{}, err
	}
	if _, err := os.Lstat(manifestPath); err == nil {
		return Manifest{}, fmt.Errorf("put checkpoint %s: %w", m.ID, ErrExists)
	}
	hr := newHashingReader(ctx, content)
	if err := writeAtomic(contentPath, hr); err != nil {
		return Manifest{}, fmt.Errorf("put checkpoint %s: %w", m.ID, err)
	}
	m.SchemaVersion = SchemaVersion
	m.SizeBytes = hr.n
	m.SHA256 = hr.sum()
	if m.CreatedAt.IsZero() {
		m.CreatedAt = l.now().UTC()
	}
	if seal != nil {
		if m, err = seal(m); err != nil {
			_ = os.Remove(contentPath)
			return Manifest{}, fmt.Errorf("put checkpoint %s: %w", m.ID, err)
		}
	}
	b, err := EncodeManifest(m)
	if err != nil {
		_ = os.Remove(contentPath)
		return Manifest{}, fmt.Errorf("put checkpoint %s: %w", m.ID, err)
	}
	if err := writeAtomic(manifestPath, bytes.NewReader(b)); err != nil {
		_ = os.Remove(contentPath)
		return Manifest{}, fmt.Errorf("put checkpoint %s: %w", m.ID, err)
	}
	return m, nil
}

// Stat implements Store.
func (l *Local) Stat(_ context.Context, id exechost.CheckpointID) (Manifest, error) {
	_, manifestPath, err := l.paths(id)
	if err != nil {
		return Manifest{}, err
	}
	f, err := openStored(manifestPath)
	if err != nil {
		return Manifest{}, fmt.Errorf("checkpoint %s: manifest: %w", id, err)
	}
	defer f.Close()
	m, err := DecodeManifest(f)
	if err != nil {
		return Manifest{}, fmt.Errorf("checkpoint %s: %w", id, err)
	}
	if m.ID != id {
		return Manifest{}, fmt.Errorf("checkpoint %s: manifest names %s: %w", id, m.ID, exechost.ErrCorruptCheckpoint)
	}
	return m, nil
}

// Get implements Store.
func (l *Local) Get(ctx context.Context, id exechost.CheckpointID) (Manifest, io.ReadCloser, error) {
	m, err := l.Stat(ctx, id)
	if err != nil {
		return Manifest{}, nil, err
	}
	contentPath, _, _ := l.paths(id)
	f, err := openStored(contentPath)
	if errors.Is(err, exechost.ErrNotFound) {
		return Manifest{}, nil, fmt.Errorf("checkpoint %s: content missing: %w", id, exechost.ErrCorruptCheckpoint)
	}
	if err != nil {
		return Manifest{}, nil, fmt.Errorf("checkpoint %s: content: %w", id, err)
	}
	return m, &verifyingReader{hr: newHashingReader(ctx, f), closer: f, m: m}, nil
}

// openStored opens one file of the store for reading: never through a
// symlink (O_NOFOLLOW), never a FIFO or device (O_NONBLOCK, then fstat),
// only a regular file with one link. A missing file is ErrNotFound, a file
// that is not a plain single-link file is ErrCorruptCheckpoint.
func openStored(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, exechost.ErrNotFound
	case errors.Is(err, syscall.ELOOP):
		return nil, fmt.Errorf("%s is a symlink: %w", filepath.Base(p), exechost.ErrCorruptCheckpoint)
	case err != nil:
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("%s is not a regular file (%s)", filepath.Base(p), fi.Mode().Type())
	case !ok || st.Nlink != 1:
		err = fmt.Errorf("%s has more than one link", filepath.Base(p))
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %w", exechost.ErrCorruptCheckpoint, err)
	}
	return f, nil
}

// Delete implements Store. The manifest goes first so a half-deleted
// checkpoint is invisible rather than corrupt.
func (l *Local) Delete(_ context.Context, id exechost.CheckpointID) error {
	contentPath, manifestPath, err := l.paths(id)
	if err != nil {
		return err
	}
	for _, p := range []string{manifestPath, contentPath} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete checkpoint %s: %w", id, err)
		}
	}
	return nil
}

// writeAtomic writes r to a temp file next to path, syncs it and renames it
// into place; on any error the temp file is removed.
func writeAtomic(path string, r io.Reader) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = io.Copy(f, r); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
