package worker

import (
	"bytes"
	"encoding/base64"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/internal/objstore"
)

func testManifest() checkpoint.Manifest {
	return checkpoint.Manifest{ID: "ckpt-w", ExecutionID: "e", ImageDigest: "sha256:" + strings.Repeat("a", 64),
		Resources: exechost.ResourceLimits{NanoCPUs: 1, MemoryBytes: 1, DiskBytes: 1, Pids: 1, Runtime: time.Second, MaxOutputBytes: 1}}
}

func TestCheckpointStoreGeneratesKeyOutsideTheStore(t *testing.T) {
	base := t.TempDir()
	cfg := Config{CheckpointDir: filepath.Join(base, "checkpoints"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	objects, err := objstore.NewDir(cfg.CheckpointDir)
	require.NoError(t, err)
	defer objects.Close()
	open := func(cfg Config) (*checkpoint.Sealed, error) {
		keys, err := checkpointKeys(cfg)
		if err != nil {
			return nil, err
		}
		return checkpointStore(cfg, objects, keys)
	}
	s, err := open(cfg)
	require.NoError(t, err)
	key := filepath.Join(base, "checkpoint-keys", checkpoint.LocalKeyFile)
	fi, err := os.Stat(key)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	m, err := s.Put(t.Context(), testManifest(), strings.NewReader("x"), nil)
	require.NoError(t, err)
	require.NotEmpty(t, m.MAC)

	// A restart reuses the key; a worker with another key refuses.
	s2, err := open(cfg)
	require.NoError(t, err)
	_, err = s2.Stat(t.Context(), m.ID)
	require.NoError(t, err)

	keyFile := filepath.Join(base, "shared.key")
	require.NoError(t, os.WriteFile(keyFile, []byte("shared "+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))+"\n"), 0o600))
	cfg.CheckpointKeyFile = keyFile
	s3, err := open(cfg)
	require.NoError(t, err)
	_, err = s3.Stat(t.Context(), m.ID)
	require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)

	require.NoError(t, os.Chmod(keyFile, 0o644))
	_, err = open(cfg)
	require.ErrorContains(t, err, "0600")
}
