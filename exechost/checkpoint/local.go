package checkpoint

import (
	"errors"
	"fmt"

	"github.com/agentflow/agentflow/internal/objstore"
)

// Local is the checkpoint store of one local directory: an Object over an
// objstore.Dir, with the layout every version wrote (<id>.tar content,
// <id>.json manifest), so existing checkpoints stay readable.
//
// Reads are hardened by the Dir against whoever else can write the
// directory: objects are opened inside the root only (os.Root), never
// through a symlink, and only a regular file with a single link is read (a
// symlink, a hard link to a file elsewhere, a FIFO or a directory is
// objstore.ErrNotRegular, which Object reports as a corrupt checkpoint).
type Local struct {
	*Object
	dir *objstore.Dir
}

// NewLocal creates dir if needed and returns a store rooted there.
func NewLocal(dir string) (*Local, error) {
	if dir == "" {
		return nil, errors.New("checkpoint dir: empty path")
	}
	d, err := objstore.NewDir(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint dir: %w", err)
	}
	return &Local{Object: NewObject(d), dir: d}, nil
}

// Dir is the directory the store writes to.
func (l *Local) Dir() string { return l.dir.Path() }

// Objects is the object store underneath (the worker sweeps its temp files).
func (l *Local) Objects() *objstore.Dir { return l.dir }
