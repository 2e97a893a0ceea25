package checkpoint

import (
	"bytes"
	"context"
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

func TestLocalRoundTrip(t *testing.T) {
	ctx := t.Context()
	s, err := NewLocal(t.TempDir())
	require.NoError(t, err)

	m := validManifest()
	m.SizeBytes, m.SHA256 = 0, ""
	got, err := s.Put(ctx, m, strings.NewReader("hello"), nil)
	require.NoError(t, err)
	require.EqualValues(t, 5, got.SizeBytes)
	require.Equal(t, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", got.SHA256)

	st, err := s.Stat(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, got, st)

	_, rc, err := s.Get(ctx, m.ID)
	require.NoError(t, err)
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.Equal(t, "hello", string(b))

	_, err = s.Put(ctx, m, strings.NewReader("again"), nil)
	require.ErrorIs(t, err, ErrExists)

	require.NoError(t, s.Delete(ctx, m.ID))
	require.NoError(t, s.Delete(ctx, m.ID), "delete is idempotent")
	_, err = s.Stat(ctx, m.ID)
	require.ErrorIs(t, err, exechost.ErrNotFound)
	_, _, err = s.Get(ctx, "missing")
	require.ErrorIs(t, err, exechost.ErrNotFound)
	_, err = s.Stat(ctx, "../escape")
	require.ErrorIs(t, err, exechost.ErrPolicy)
}

func TestLocalDetectsTampering(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, err := NewLocal(dir)
	require.NoError(t, err)
	m := validManifest()
	_, err = s.Put(ctx, m, strings.NewReader("hello"), nil)
	require.NoError(t, err)

	for name, content := range map[string]string{"same size": "jello", "longer": "hello!", "shorter": "hell"} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "ckpt-1.tar"), []byte(content), 0o600))
			_, rc, err := s.Get(ctx, m.ID)
			require.NoError(t, err)
			defer rc.Close()
			_, err = io.ReadAll(rc)
			require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)
		})
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestLocalFailedPutLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	s, err := NewLocal(dir)
	require.NoError(t, err)

	_, err = s.Put(t.Context(), validManifest(), io.MultiReader(bytes.NewReader([]byte("partial")), failingReader{}), nil)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = s.Put(ctx, validManifest(), strings.NewReader("x"), nil)
	require.ErrorIs(t, err, context.Canceled)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
	_, err = s.Stat(t.Context(), "ckpt-1")
	require.ErrorIs(t, err, exechost.ErrNotFound)
}
