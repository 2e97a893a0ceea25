package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/agentflow/agentflow/internal/logstore"
	"github.com/agentflow/agentflow/internal/objstore"
)

// ResultDirFor is where a worker without --store and without --result-dir
// keeps attempt results: "results" next to its checkpoint directory
// (.data/results by default), so a worker pointed at a data directory
// keeps all its state there and never writes into its working directory.
func ResultDirFor(checkpointDir string) string {
	return filepath.Join(filepath.Dir(filepath.Clean(checkpointDir)), "results")
}

// Store layout under a shared root (--store): one prefix per kind of state.
const (
	checkpointPrefix = "checkpoints"
	logPrefix        = logstore.Prefix
	resultPrefix     = "results"
)

// Stores are the object stores a worker keeps durable state in. Without
// --store each is a local directory (CheckpointDir, LogDir, ResultDir);
// with it each is a prefix of the one shared root, so every worker reads
// what every other wrote.
type Stores struct {
	// Root names where the state lives, for logs and messages (never
	// credentials): "local directories" or the --store URL's store.
	Root string
	// Shared: the stores are read by other workers (--store is set).
	Shared bool
	// Checkpoints holds <id>.tar and <id>.json (checkpoint.Object).
	Checkpoints objstore.Store
	// Logs holds step logs under <agent>/<run>/<step>/<attempt>/.
	Logs objstore.Store
	// Results holds signed attempt results, <agent>/<run>/<step>/<attempt>.json.
	Results objstore.Store

	// dirs are the local directories among the stores (closed by Close);
	// sweep those whose temp files only objstore writes (swept at start).
	dirs, sweep []*objstore.Dir
}

// CheckSharedStore is the rule that a shared store (--store) comes with a
// shared key file (--checkpoint-key-file).
func CheckSharedStore(store, keyFile string) error {
	if store == "" || keyFile != "" {
		return nil
	}
	return errors.New("--store " + store + " needs --checkpoint-key-file: every worker on a shared store " +
		"must verify every other worker's checkpoint manifests, so all of them need the same key file " +
		"(a key each worker generated for itself would make its checkpoints unreadable everywhere else)")
}

// openStores builds the worker's stores from cfg (defaults applied): the
// root is opened once and the three stores derived from it. It also
// removes what writers killed mid-Put left in local directories (a kill -9
// during a checkpoint leaves a temp file that nothing else would ever
// remove).
func openStores(ctx context.Context, cfg Config) (*Stores, error) {
	if err := CheckSharedStore(cfg.Store, cfg.CheckpointKeyFile); err != nil {
		return nil, err
	}
	s, err := OpenStores(ctx, cfg.Store, cfg.CheckpointDir, cfg.LogDir, cfg.ResultDir)
	if err != nil {
		return nil, err
	}
	for _, d := range s.sweep {
		n, err := d.SweepTemp(ctx)
		if err != nil {
			// Not fatal: the leftovers cost space, not correctness.
			cfg.Logger.Warn("sweep temp files of killed writers", "store", d.String(), "error", err)
		}
		if n > 0 {
			cfg.Logger.Info("removed temp files of killed writers", "store", d.String(), "removed", n)
		}
	}
	return s, nil
}

// OpenStores opens the state stores of a worker configured with these
// settings (--store, else the three local directories), for the worker and
// for what reads or collects its state from outside (agentctl gc). It
// neither checks the shared key rule nor sweeps temp files.
func OpenStores(ctx context.Context, store, checkpointDir, logDir, resultDir string) (*Stores, error) {
	s := &Stores{}
	if store != "" {
		root, err := objstore.Open(ctx, store, os.Getenv)
		if err != nil {
			return nil, fmt.Errorf("--store: %w", err) // the error names the store
		}
		s.Root, s.Shared = root.String(), true
		s.Checkpoints = objstore.Sub(root, checkpointPrefix)
		s.Logs = objstore.Sub(root, logPrefix)
		s.Results = objstore.Sub(root, resultPrefix)
		if d, ok := root.(*objstore.Dir); ok {
			s.dirs, s.sweep = append(s.dirs, d), append(s.sweep, d)
		}
	} else {
		s.Root = "local directories"
		for _, x := range []struct {
			dst  *objstore.Store
			path string
			what string
		}{
			{&s.Checkpoints, checkpointDir, "checkpoint dir"},
			{&s.Logs, logDir, "log dir"},
			{&s.Results, resultDir, "result dir"},
		} {
			d, err := objstore.NewDir(x.path)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("%s %s: %w", x.what, x.path, err)
			}
			*x.dst = d
			s.dirs = append(s.dirs, d)
			s.sweep = append(s.sweep, d)
		}
	}
	return s, nil
}

// logValue describes the stores for the worker's start-up log.
func (s *Stores) logValue() slog.Value {
	return slog.GroupValue(
		slog.String("root", s.Root),
		slog.Bool("shared", s.Shared),
		slog.String("checkpoints", s.Checkpoints.String()),
		slog.String("logs", s.Logs.String()),
		slog.String("results", s.Results.String()),
	)
}

// Close releases the local directory handles.
func (s *Stores) Close() {
	for _, d := range s.dirs {
		_ = d.Close()
	}
}
