package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/agentflow/agentflow/internal/logstore"
	"github.com/agentflow/agentflow/internal/objstore"
)

// openLogStore opens the log store the flags name: the logs of the
// --store object store (what every worker of a deployment writes), else
// the local directory --log-dir. A missing directory is not created: the
// reader would only find it empty.
func openLogStore(ctx context.Context, o *logsOptions) (*logstore.Store, func(), error) {
	if o.Store != "" {
		root, err := objstore.Open(ctx, o.Store, os.Getenv)
		if err != nil {
			return nil, nil, fmt.Errorf("open log store %s: %w", o.Store, err)
		}
		return logstore.OnRoot(root, logstore.Options{}), closeStore(root), nil
	}
	if _, err := os.Stat(o.LogDir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("no log directory %s (logs live where the worker runs, or in the object store of --store)", o.LogDir)
	}
	s, closeDir, err := logstore.NewDir(o.LogDir, logstore.Options{})
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = closeDir() }, nil
}

func closeStore(s objstore.Store) func() {
	return func() {
		if c, ok := s.(io.Closer); ok {
			_ = c.Close()
		}
	}
}
