package hosttest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"strings"
	"sync"

	"github.com/agentflow/agentflow/exechost"
)

// File is one regular file of a fake workspace.
type File struct {
	Data []byte
	Mode fs.FileMode // permission bits; 0 reads as 0o644
	// Symlink, when set, makes the entry a symbolic link to this target
	// (Data empty). ReadFile follows it; checkpoints apply
	// exechost.CheckSymlink to it, as the Docker host's filter does.
	Symlink string
}

// ErrNoSpace is what a write past the workspace's DiskBytes returns, like
// ENOSPC on the Docker host's tmpfs.
var ErrNoSpace = errors.New("no space left on device")

// Workspace is the in-memory /workspace of one fake sandbox: regular files
// keyed by clean relative path (directories are implied). It is safe for
// concurrent use, so a Handler may hand it to goroutines and Fake.Probe may
// touch it while an Exec runs. Once the sandbox is destroyed every method
// fails with exechost.ErrTerminated.
type Workspace struct {
	mu      sync.Mutex
	files   map[string]File
	size    int64
	limit   int64 // DiskBytes; <= 0 means none
	dead    bool
	changed chan struct{} // closed and replaced on every change
}

func newWorkspace(files map[string]File, limit int64) *Workspace {
	w := &Workspace{files: map[string]File{}, limit: limit, changed: make(chan struct{})}
	for p, f := range files {
		w.files[p] = copyFile(f)
		w.size += int64(len(f.Data))
	}
	return w
}

func copyFile(f File) File {
	return File{Data: append([]byte(nil), f.Data...), Mode: f.Mode, Symlink: f.Symlink}
}

// Clean maps a path as a command sees it (relative to /workspace, or
// absolute under /workspace) to a workspace key. Paths outside the
// workspace are refused: the fake has no other writable filesystem.
func Clean(name string) (string, error) {
	if strings.HasPrefix(name, "/") {
		rel, ok := strings.CutPrefix(path.Clean(name), "/workspace/")
		if !ok {
			return "", fmt.Errorf("%s: outside /workspace: %w", name, fs.ErrPermission)
		}
		name = rel
	}
	p := path.Clean(name)
	if p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("%s: not a file in the workspace: %w", name, fs.ErrInvalid)
	}
	return p, nil
}

// lock takes w.mu and fails if the sandbox is gone. On success the caller
// unlocks.
func (w *Workspace) lock() error {
	w.mu.Lock()
	if w.dead {
		w.mu.Unlock()
		return fmt.Errorf("workspace: %w", exechost.ErrTerminated)
	}
	return nil
}

// ReadFile returns a copy of name's content.
func (w *Workspace) ReadFile(name string) ([]byte, error) {
	p, err := Clean(name)
	if err != nil {
		return nil, err
	}
	if err := w.lock(); err != nil {
		return nil, err
	}
	defer w.mu.Unlock()
	for hops := 0; ; hops++ {
		f, ok := w.files[p]
		switch {
		case !ok:
			return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
		case f.Symlink == "":
			return append([]byte(nil), f.Data...), nil
		case hops >= 40:
			return nil, fmt.Errorf("%s: too many levels of symbolic links: %w", name, fs.ErrInvalid)
		}
		// Lexical is enough here: checkpoints only hold links that obey
		// exechost.CheckSymlink, and a link in the way is not modelled.
		next, err := Clean(path.Join(path.Dir(p), f.Symlink))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		p = next
	}
}

// Exists reports whether name is a file or an implied directory.
func (w *Workspace) Exists(name string) bool {
	p, err := Clean(name)
	if err != nil || w.lock() != nil {
		return false
	}
	defer w.mu.Unlock()
	return w.existsLocked(p)
}

func (w *Workspace) existsLocked(p string) bool {
	if _, ok := w.files[p]; ok {
		return true
	}
	for k := range w.files {
		if strings.HasPrefix(k, p+"/") {
			return true
		}
	}
	return false
}

// WriteFile replaces name (mode 0 keeps an existing file's mode, else 0o644).
func (w *Workspace) WriteFile(name string, data []byte, mode fs.FileMode) error {
	return w.write(name, data, mode, false)
}

// Symlink makes name a symbolic link to target (replacing a file there).
func (w *Workspace) Symlink(target, name string) error {
	p, err := Clean(name)
	if err != nil {
		return err
	}
	if err := w.lock(); err != nil {
		return err
	}
	defer w.mu.Unlock()
	if _, exists := w.files[p]; !exists && w.existsLocked(p) {
		return fmt.Errorf("%s: is a directory: %w", name, fs.ErrExist)
	}
	w.size -= int64(len(w.files[p].Data))
	w.files[p] = File{Mode: 0o777, Symlink: target}
	w.notifyLocked()
	return nil
}

// AppendFile appends to name, creating it.
func (w *Workspace) AppendFile(name string, data []byte) error {
	return w.write(name, data, 0, true)
}

func (w *Workspace) write(name string, data []byte, mode fs.FileMode, appendTo bool) error {
	p, err := Clean(name)
	if err != nil {
		return err
	}
	if err := w.lock(); err != nil {
		return err
	}
	defer w.mu.Unlock()
	old, exists := w.files[p]
	// A path cannot be a file and a directory, nor sit below a file.
	if !exists && w.existsLocked(p) {
		return fmt.Errorf("%s: is a directory: %w", name, fs.ErrInvalid)
	}
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if _, isFile := w.files[dir]; isFile {
			return fmt.Errorf("%s: %s is not a directory: %w", name, dir, fs.ErrInvalid)
		}
	}
	f := File{Mode: mode}
	if exists && mode == 0 {
		f.Mode = old.Mode
	}
	if f.Mode == 0 {
		f.Mode = 0o644
	}
	if appendTo {
		f.Data = append(append([]byte(nil), old.Data...), data...)
	} else {
		f.Data = append([]byte(nil), data...)
	}
	size := w.size - int64(len(old.Data)) + int64(len(f.Data))
	if w.limit > 0 && size > w.limit {
		return fmt.Errorf("%s: %w", name, ErrNoSpace)
	}
	w.files[p], w.size = f, size
	w.notifyLocked()
	return nil
}

// Remove deletes a file; a missing one is fs.ErrNotExist.
func (w *Workspace) Remove(name string) error {
	p, err := Clean(name)
	if err != nil {
		return err
	}
	if err := w.lock(); err != nil {
		return err
	}
	defer w.mu.Unlock()
	f, ok := w.files[p]
	if !ok {
		return fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	delete(w.files, p)
	w.size -= int64(len(f.Data))
	w.notifyLocked()
	return nil
}

// Files returns a deep copy of every file.
func (w *Workspace) Files() map[string]File {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]File, len(w.files))
	for p, f := range w.files {
		out[p] = copyFile(f)
	}
	return out
}

// WaitFor blocks until name exists, ctx ends or the sandbox is destroyed.
// It is how a handler waits for something done behind its back (Probe)
// without polling.
func (w *Workspace) WaitFor(ctx context.Context, name string) error {
	p, err := Clean(name)
	if err != nil {
		return err
	}
	for {
		if err := w.lock(); err != nil {
			return err
		}
		ok, ch := w.existsLocked(p), w.changed
		w.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ch:
		}
	}
}

func (w *Workspace) notifyLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// destroy makes every later call fail and wakes waiters.
func (w *Workspace) destroy() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.dead {
		w.dead = true
		w.notifyLocked()
	}
}

// snapshot is a consistent deep copy for a checkpoint.
func (w *Workspace) snapshot() (map[string]File, error) {
	if err := w.lock(); err != nil {
		return nil, err
	}
	defer w.mu.Unlock()
	out := make(map[string]File, len(w.files))
	for p, f := range w.files {
		out[p] = copyFile(f)
	}
	return out, nil
}

// layer copies files over dst: later layers win per path.
func layer(dst, src map[string]File) {
	maps.Copy(dst, src)
}
