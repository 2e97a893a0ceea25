package checkpoint

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
)

func validManifest() Manifest {
	return Manifest{
		SchemaVersion: SchemaVersion,
		ID:            "ckpt-1",
		ExecutionID:   "exec-1",
		ImageDigest:   "sha256:" + strings.Repeat("a", 64),
		Resources: exechost.ResourceLimits{NanoCPUs: 1e9, MemoryBytes: 64 << 20, DiskBytes: 16 << 20,
			Pids: 64, Runtime: time.Minute, MaxOutputBytes: 1 << 20},
		SizeBytes: 3,
		SHA256:    strings.Repeat("b", 64),
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

func TestDecodeManifest(t *testing.T) {
	good, err := EncodeManifest(validManifest())
	require.NoError(t, err)

	tests := []struct {
		name    string
		input   string
		wantErr string
	}{
		{name: "valid", input: string(good)},
		{name: "unknown field", input: strings.Replace(string(good), `"id"`, `"extra": 1, "id"`, 1), wantErr: "unknown field"},
		{name: "other version", input: strings.Replace(string(good), `"schema_version": 2`, `"schema_version": 3`, 1), wantErr: "schema_version 3"},
		{name: "bad sha", input: strings.Replace(string(good), strings.Repeat("b", 64), "xyz", 1), wantErr: "sha256"},
		{name: "path-like id", input: strings.Replace(string(good), `"ckpt-1"`, `"../etc"`, 1), wantErr: "id"},
		{name: "trailing data", input: string(good) + "{}", wantErr: "trailing"},
		{name: "not json", input: "tar", wantErr: "decode manifest"},
		{name: "missing resources", input: strings.Replace(string(good), `"Pids": 64`, `"Pids": 0`, 1), wantErr: "resources"},
		{name: "missing created", input: strings.Replace(string(good), `"2026-01-02T03:04:05Z"`, `"0001-01-01T00:00:00Z"`, 1), wantErr: "created_at"},
		{name: "huge", input: strings.Repeat(" ", maxManifestBytes+1), wantErr: "larger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DecodeManifest(strings.NewReader(tt.input))
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.Equal(t, validManifest(), m)
				return
			}
			require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestValidID(t *testing.T) {
	for _, id := range []exechost.CheckpointID{"", "../x", "a/b", ".hidden", "a\x00", exechost.CheckpointID(strings.Repeat("a", 129))} {
		require.ErrorIs(t, ValidID(id), exechost.ErrPolicy, "id %q", id)
	}
	require.NoError(t, ValidID("ckpt-0123_abc.DEF"))
}

// TestLocalKeepsTheLayout: Local is an Object over a Dir that reads and
// writes <id>.tar and <id>.json as every earlier version did, so a worker
// upgraded in place keeps its checkpoints.
func TestLocalKeepsTheLayout(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	// A checkpoint as the earlier Local wrote it: two plain files.
	m := validManifest()
	m.SizeBytes, m.SHA256 = 5, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	b, err := EncodeManifest(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ckpt-1.tar"), []byte("hello"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ckpt-1.json"), b, 0o600))

	s, err := NewLocal(dir)
	require.NoError(t, err)
	got, rc, err := s.Get(ctx, "ckpt-1")
	require.NoError(t, err)
	require.Equal(t, m, got)
	content, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.Equal(t, "hello", string(content))

	m2 := validManifest()
	m2.ID = "ckpt-2"
	_, err = s.Put(ctx, m2, strings.NewReader("world"), nil)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(s.Dir(), "ckpt-2.tar"))
	require.FileExists(t, filepath.Join(s.Dir(), "ckpt-2.json"))

	_, err = NewLocal("")
	require.Error(t, err)
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }
