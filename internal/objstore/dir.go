package objstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNotRegular: what is stored under a key is not a plain file with one
// link (a symlink, FIFO, device, directory entry of another kind, or a hard
// link to something else). Someone other than the store put it there;
// callers treat it as a corrupt object, never as absent.
var ErrNotRegular = errors.New("stored object is not a plain single-link file")

// tempMarker is part of every temp file name (".<name>.tmp-<random>"); the
// leading '.' keeps temp files out of the key space (CheckKey refuses it).
const tempMarker = ".tmp-"

// TempMaxAge is how old a temp file must be before SweepTemp removes it: a
// live writer touches its temp file continuously, a killed one never again.
const TempMaxAge = time.Minute

// Dir is a Store in a local directory: key "a/b/c" is the file root/a/b/c.
// Every path is resolved inside an os.Root, so a symlink planted anywhere in
// the tree cannot lead outside the root, and the object itself is never
// opened through a symlink. A Put writes a temp file next to the target,
// fsyncs it and renames it into place, so a reader sees the old object or
// the whole new one, never a partial one.
//
// Limitation of a file tree: a key cannot be both an object and a prefix
// of another object ("a" and "a/b"); such a Put fails.
type Dir struct {
	root *os.Root
	path string
}

var _ Store = (*Dir)(nil)

// NewDir opens (creating it if needed) the directory root as a Store.
func NewDir(root string) (*Dir, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("object store dir %s: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, dirError("dir "+abs, "open", "", err)
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, dirError("dir "+abs, "open", "", err)
	}
	return &Dir{root: r, path: abs}, nil
}

// Close releases the root directory handle.
func (d *Dir) Close() error { return d.root.Close() }

// Path is the root directory.
func (d *Dir) Path() string { return d.path }

// String implements Store.
func (d *Dir) String() string { return "dir " + d.path }

// dirError maps a file-system error: a missing file is ErrNotFound; a full,
// read-only or forbidden file system is an *UnavailableError whose Reason is
// the one errno phrase ("no space left on device"); anything else is
// wrapped with the store, op and key.
func dirError(store, op, key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNotFound
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EACCES, syscall.EPERM, syscall.EIO:
			return &UnavailableError{Store: store, Op: op, Key: key, Reason: errno.Error(), Err: err}
		}
	}
	return fmt.Errorf("%s: %s %s: %w", store, op, key, err)
}

func (d *Dir) err(op, key string, err error) error {
	if escapes(err) {
		return fmt.Errorf("%s: %s %s: %w (a symlink in the path leads outside the store)", d, op, key, ErrNotRegular)
	}
	return dirError(d.String(), op, key, err)
}

// escapes reports os.Root's refusal of a path that a symlink leads out of
// the root: a *PathError whose cause is not an errno (os keeps that error
// unexported).
func escapes(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) && !errors.As(pe.Err, &errno) && !errors.Is(err, fs.ErrNotExist)
}

// openParent opens the directory holding key (creating it when create is
// set) and returns it with the key's last segment. The directory is
// resolved inside the root; the last segment is then used only with *at
// calls that never follow a symlink.
func (d *Dir) openParent(key string, create bool) (*os.File, string, error) {
	dir, name := path.Split(key)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	f, err := d.root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if errors.Is(err, fs.ErrNotExist) && create && dir != "." {
		// Only a missing directory pays for MkdirAll's walk: most Puts go
		// into one that exists (an attempt's log chunks, its end marker).
		if err := d.root.MkdirAll(dir, 0o700); err != nil {
			return nil, "", err
		}
		f, err = d.root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	}
	if err != nil {
		return nil, "", err
	}
	return f, name, nil
}

// Put implements Store.
func (d *Dir) Put(ctx context.Context, key string, r io.Reader, opts PutOptions) (Info, error) {
	if err := CheckKey(key); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	parent, name, err := d.openParent(key, true)
	if err != nil {
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
			return Info{}, fmt.Errorf("%s: put %s: a parent of the key is an object", d, key)
		}
		return Info{}, d.err("put", key, err)
	}
	defer parent.Close()
	pfd := int(parent.Fd())

	tmp, f, err := createTemp(pfd, name)
	if err != nil {
		return Info{}, d.err("put", key, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = f.Close()
			_ = unix.Unlinkat(pfd, tmp, 0)
		}
	}()
	w := &writeErr{w: f}
	n, err := io.Copy(w, &ctxReader{ctx: ctx, r: r})
	switch {
	case ctx.Err() != nil:
		return Info{}, ctx.Err()
	case w.err != nil:
		return Info{}, d.err("put", key, w.err)
	case err != nil:
		return Info{}, fmt.Errorf("%s: put %s: read: %w", d, key, err)
	}
	if !opts.NoSync {
		if err := f.Sync(); err != nil {
			return Info{}, d.err("put", key, err)
		}
	}
	if err := f.Close(); err != nil {
		return Info{}, d.err("put", key, err)
	}
	// The last chance to give up: after the rename the object is visible.
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	if opts.IfAbsent {
		err = renameNoReplace(pfd, tmp, name)
		if errors.Is(err, syscall.EEXIST) {
			return Info{}, ErrExists
		}
	} else {
		err = unix.Renameat(pfd, tmp, pfd, name)
	}
	if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTEMPTY) {
		return Info{}, fmt.Errorf("%s: put %s: the key is a prefix of other objects", d, key)
	}
	if err != nil {
		return Info{}, d.err("put", key, err)
	}
	committed = true
	if !opts.NoSync {
		// Make the rename durable: a crash right after Put returns must not lose it.
		_ = parent.Sync()
	}
	var st unix.Stat_t
	mod := time.Now()
	if unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		mod = time.Unix(st.Mtim.Unix())
	}
	return Info{Key: key, Size: n, ModTime: mod}, nil
}

// createTemp creates ".<name>.tmp-<random>" in the directory pfd, never
// through an existing entry (O_EXCL|O_NOFOLLOW).
func createTemp(pfd int, name string) (string, *os.File, error) {
	for range 10 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		tmp := "." + name + tempMarker + hex.EncodeToString(b[:])
		fd, err := unix.Openat(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, syscall.EEXIST) {
			continue
		}
		if err != nil {
			return "", nil, err
		}
		return tmp, os.NewFile(uintptr(fd), tmp), nil
	}
	return "", nil, fmt.Errorf("create temp file for %s: %w", name, fs.ErrExist)
}

// Get implements Store.
func (d *Dir) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return d.open(key)
}

// open opens the object for reading: the last segment never through a
// symlink (O_NOFOLLOW), never blocking on a FIFO (O_NONBLOCK), and only a
// regular file with one link (checked on the open descriptor, so nothing
// can be swapped in between). A directory under key is ErrNotFound (no
// object there); any other non-plain file is ErrNotRegular.
func (d *Dir) open(key string) (*os.File, error) {
	parent, name, err := d.openParent(key, false)
	if errors.Is(err, syscall.ENOTDIR) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, d.err("get", key, err)
	}
	defer parent.Close()
	fd, err := unix.Openat(int(parent.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s: get %s: %w (symlink)", d, key, ErrNotRegular)
	}
	if err != nil {
		return nil, d.err("get", key, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, d.err("get", key, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		_ = unix.Close(fd)
		return nil, ErrNotFound
	}
	if err := checkPlain(st.Mode&unix.S_IFMT == unix.S_IFREG, uint64(st.Nlink), unixKind(st.Mode)); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("%s: get %s: %w", d, key, err)
	}
	// A regular file never blocks; put the descriptor back in its ordinary
	// mode before os.File sees it.
	if err := unix.SetNonblock(fd, false); err != nil {
		_ = unix.Close(fd)
		return nil, d.err("get", key, err)
	}
	return os.NewFile(uintptr(fd), key), nil
}

// checkPlain accepts a regular file with exactly one link.
func checkPlain(regular bool, nlink uint64, kind any) error {
	if !regular {
		return fmt.Errorf("%w (%v)", ErrNotRegular, kind)
	}
	if nlink != 1 {
		return fmt.Errorf("%w (%d links)", ErrNotRegular, nlink)
	}
	return nil
}

// unixKind names a file type for messages.
func unixKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFDIR:
		return "directory"
	}
	return "unknown"
}

// checkInfo is checkPlain for an os.FileInfo.
func checkInfo(fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%w (no link count)", ErrNotRegular)
	}
	return checkPlain(fi.Mode().IsRegular(), uint64(st.Nlink), unixKind(st.Mode))
}

// Stat implements Store.
func (d *Dir) Stat(ctx context.Context, key string) (Info, error) {
	if err := CheckKey(key); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	fi, err := d.root.Lstat(key)
	if errors.Is(err, syscall.ENOTDIR) {
		return Info{}, ErrNotFound
	}
	if err != nil {
		return Info{}, d.err("stat", key, err)
	}
	if fi.IsDir() {
		return Info{}, ErrNotFound
	}
	if err := checkInfo(fi); err != nil {
		return Info{}, fmt.Errorf("%s: stat %s: %w", d, key, err)
	}
	return Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Delete implements Store.
func (d *Dir) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	parent, name, err := d.openParent(key, false)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err != nil {
		return d.err("delete", key, err)
	}
	defer parent.Close()
	err = unix.Unlinkat(int(parent.Fd()), name, 0)
	switch {
	case err == nil, errors.Is(err, syscall.ENOENT):
		return nil
	case errors.Is(err, syscall.EISDIR):
		return nil // a directory is no object
	default:
		return d.err("delete", key, err)
	}
}

// ctxReader stops a copy as soon as ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// writeErr remembers the writer's own error, so Put can tell a full disk
// (the store's problem) from a failing source reader (the caller's).
type writeErr struct {
	w   io.Writer
	err error
}

func (w *writeErr) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		w.err = err
	}
	return n, err
}

// linkNoReplace is the portable no-replace rename: link(2) fails with
// EEXIST when name exists. For a moment the object has two links, so a
// concurrent Get may see ErrNotRegular; only file systems without
// renameat2 take this path.
func linkNoReplace(dfd int, old, name string) error {
	if err := unix.Linkat(dfd, old, dfd, name, 0); err != nil {
		return err
	}
	return unix.Unlinkat(dfd, old, 0)
}
