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

	"github.com/agentflow/agentflow/internal/objstore"
)

func quietConfig(base string) Config {
	cfg := Config{
		CheckpointDir: filepath.Join(base, "checkpoints"),
		LogDir:        filepath.Join(base, "logs"),
		ResultDir:     filepath.Join(base, "results"),
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	return cfg
}

// TestStartSweepsTempFilesOfKilledWriters reproduces the chaos finding: a
// worker killed (kill -9) mid-checkpoint leaves its temp file in the
// checkpoint directory, and nothing ever removed it. The next start does,
// leaving young temp files (a live writer's) and real objects alone.
func TestStartSweepsTempFilesOfKilledWriters(t *testing.T) {
	base := t.TempDir()
	cfg := quietConfig(base)
	old := time.Now().Add(-time.Hour)
	write := func(p string, age time.Time) {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o600))
		require.NoError(t, os.Chtimes(p, age, age))
	}
	dead := []string{
		filepath.Join(cfg.CheckpointDir, ".ckpt-dead.tar.tmp-12345"), // the old Local's naming
		filepath.Join(cfg.ResultDir, "agent", "run", ".s1.tmp-999"),
	}
	alive := []string{
		filepath.Join(cfg.CheckpointDir, ".ckpt-live.tar.tmp-777"),
		filepath.Join(cfg.CheckpointDir, "ckpt-old.tar"),
		filepath.Join(cfg.CheckpointDir, "ckpt-old.json"),
	}
	for _, p := range dead {
		write(p, old)
	}
	write(alive[0], time.Now())
	write(alive[1], old)
	write(alive[2], old)

	s, err := openStores(t.Context(), cfg)
	require.NoError(t, err)
	defer s.Close()
	for _, p := range dead {
		require.NoFileExists(t, p, "a killed writer's temp file is swept at start")
	}
	for _, p := range alive {
		require.FileExists(t, p)
	}
	require.False(t, s.Shared)
	require.Equal(t, "dir "+cfg.CheckpointDir, s.Checkpoints.String())
	require.Equal(t, "dir "+cfg.ResultDir, s.Results.String())
}

func sharedKeyFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "shared.key")
	require.NoError(t, os.WriteFile(p, []byte("k1 "+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{3}, 32))+"\n"), 0o600))
	return p
}

func TestSharedStoreLayoutAndKeyRule(t *testing.T) {
	base := t.TempDir()
	cfg := quietConfig(base)
	cfg.Store = "file://" + filepath.Join(base, "bucket")

	_, err := openStores(t.Context(), cfg)
	require.ErrorContains(t, err, "--checkpoint-key-file", "a shared store without a shared key is refused")
	require.ErrorContains(t, err, "unreadable")

	cfg.CheckpointKeyFile = sharedKeyFile(t)
	s, err := openStores(t.Context(), cfg)
	require.NoError(t, err)
	defer s.Close()
	require.True(t, s.Shared)

	// Each kind of state lands under its prefix of the one root.
	for prefix, st := range map[string]objstore.Store{"checkpoints": s.Checkpoints, "logs": s.Logs, "results": s.Results} {
		_, err := st.Put(t.Context(), "k", strings.NewReader(prefix), objstore.PutOptions{})
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(base, "bucket", prefix, "k"))
		require.NoError(t, err)
		require.Equal(t, prefix, string(b))
	}
	// Nothing went to the local directories.
	for _, d := range []string{cfg.CheckpointDir, cfg.LogDir, cfg.ResultDir} {
		require.NoDirExists(t, d)
	}

	cfg.Store = "ftp://nowhere"
	_, err = openStores(t.Context(), cfg)
	require.ErrorContains(t, err, "ftp://nowhere")
}

func TestResultDirDefaultsNextToCheckpoints(t *testing.T) {
	tests := []struct {
		name       string
		checkpoint string
		result     string
		want       string
	}{
		{name: "default data dir", want: filepath.Join(".data", "results")},
		{name: "operator's data dir", checkpoint: "/var/lib/agentflow/checkpoints", want: "/var/lib/agentflow/results"},
		{name: "explicit", checkpoint: "/var/lib/agentflow/checkpoints", result: "/srv/results", want: "/srv/results"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{CheckpointDir: tt.checkpoint, ResultDir: tt.result}
			cfg.setDefaults()
			require.Equal(t, tt.want, cfg.ResultDir)
		})
	}
}
