package checkpoint

import (
	"bytes"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
)

func testKeyring(t *testing.T, ids ...string) *Keyring {
	t.Helper()
	var keys []Key
	for _, id := range ids {
		keys = append(keys, Key{ID: id, Secret: bytes.Repeat([]byte(id[:1]), MinKeyBytes)})
	}
	k, err := NewKeyring(keys...)
	require.NoError(t, err)
	return k
}

func sealedStore(t *testing.T, keys *Keyring, opts SealedOptions) (*Sealed, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := NewLocal(dir)
	require.NoError(t, err)
	s, err := NewSealed(l, keys, opts)
	require.NoError(t, err)
	return s, l.Dir()
}

func TestSealedRoundTripAndRotation(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	l, err := NewLocal(dir)
	require.NoError(t, err)
	old, err := NewSealed(l, testKeyring(t, "old"), SealedOptions{})
	require.NoError(t, err)
	m, err := old.Put(ctx, validManifest(), strings.NewReader("hello"), nil)
	require.NoError(t, err)
	require.Equal(t, SchemaVersion, m.SchemaVersion)
	require.Equal(t, "old", m.KeyID)
	require.Len(t, m.MAC, 64)

	// Rotation: the new key signs, the old one still verifies.
	rotated, err := NewSealed(l, testKeyring(t, "new", "old"), SealedOptions{})
	require.NoError(t, err)
	got, rc, err := rotated.Get(ctx, m.ID)
	require.NoError(t, err)
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.Equal(t, "hello", string(b))
	require.Equal(t, m, got)
	m2 := validManifest()
	m2.ID = "ckpt-2"
	m2, err = rotated.Put(ctx, m2, strings.NewReader("x"), nil)
	require.NoError(t, err)
	require.Equal(t, "new", m2.KeyID)

	// A worker that dropped the old key refuses what it signed.
	dropped, err := NewSealed(l, testKeyring(t, "new"), SealedOptions{})
	require.NoError(t, err)
	_, err = dropped.Stat(ctx, m.ID)
	require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)
	_, err = dropped.Stat(ctx, m2.ID)
	require.NoError(t, err)
}

// TestSealedRefusesEditedManifests edits the stored manifest the way a
// writer to the storage could, and expects every edit refused.
func TestSealedRefusesEditedManifests(t *testing.T) {
	ctx := t.Context()
	s, dir := sealedStore(t, testKeyring(t, "k1", "z2"), SealedOptions{})
	m, err := s.Put(ctx, validManifest(), strings.NewReader("hello"), nil)
	require.NoError(t, err)
	path := filepath.Join(dir, string(m.ID)+".json")
	orig, err := os.ReadFile(path)
	require.NoError(t, err)
	forged, err := mac(m, []byte("not the key, but long enough for hmac"))
	require.NoError(t, err)

	edits := map[string]func(string) string{
		"image": func(j string) string { return strings.Replace(j, m.ImageDigest, "sha256:"+strings.Repeat("c", 64), 1) },
		"memory": func(j string) string {
			return strings.Replace(j, `"MemoryBytes": 67108864`, `"MemoryBytes": 67108865`, 1)
		},
		"gpus":           func(j string) string { return strings.Replace(j, `"GPUs": 0`, `"GPUs": -1`, 1) },
		"size":           func(j string) string { return strings.Replace(j, `"size_bytes": 5`, `"size_bytes": 4`, 1) },
		"sha256":         func(j string) string { return strings.Replace(j, m.SHA256, strings.Repeat("d", 64), 1) },
		"mac removed":    func(j string) string { return strings.Replace(j, `"mac": "`+m.MAC+`"`, `"mac": ""`, 1) },
		"mac forged":     func(j string) string { return strings.Replace(j, m.MAC, forged, 1) },
		"mac flipped":    func(j string) string { return strings.Replace(j, m.MAC, flipHex(m.MAC), 1) },
		"key id swapped": func(j string) string { return strings.Replace(j, `"key_id": "k1"`, `"key_id": "z2"`, 1) },
		"key id unknown": func(j string) string { return strings.Replace(j, `"key_id": "k1"`, `"key_id": "k9"`, 1) },
		"schema downgrade": func(j string) string {
			j = strings.Replace(j, `"schema_version": 2`, `"schema_version": 1`, 1)
			j = strings.Replace(j, `,
  "key_id": "k1"`, "", 1)
			return strings.Replace(j, `,
  "mac": "`+m.MAC+`"`, "", 1)
		},
		"schema unknown": func(j string) string { return strings.Replace(j, `"schema_version": 2`, `"schema_version": 3`, 1) },
		"reason": func(j string) string {
			return strings.Replace(j, `"execution_id": "exec-1"`, `"execution_id": "exec-2"`, 1)
		},
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			changed := edit(string(orig))
			require.NotEqual(t, string(orig), changed, "the edit must change the manifest")
			require.NoError(t, os.WriteFile(path, []byte(changed), 0o600))
			t.Cleanup(func() { require.NoError(t, os.WriteFile(path, orig, 0o600)) })
			_, err := s.Stat(ctx, m.ID)
			require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)
			_, _, err = s.Get(ctx, m.ID)
			require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)
		})
	}
	_, err = s.Stat(ctx, m.ID)
	require.NoError(t, err, "the original still verifies")
}

func flipHex(s string) string {
	if s[0] == '0' {
		return "1" + s[1:]
	}
	return "0" + s[1:]
}

func TestSealedLegacyOnlyWhenAllowed(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	l, err := NewLocal(dir)
	require.NoError(t, err)
	legacy := validManifest()
	_, err = l.Put(ctx, legacy, strings.NewReader("old"), func(m Manifest) (Manifest, error) {
		m.SchemaVersion = LegacySchemaVersion
		return m, nil
	})
	require.NoError(t, err)

	strict, err := NewSealed(l, testKeyring(t, "k1"), SealedOptions{})
	require.NoError(t, err)
	_, err = strict.Stat(ctx, legacy.ID)
	require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)
	require.ErrorContains(t, err, "unsigned")

	lax, err := NewSealed(l, testKeyring(t, "k1"), SealedOptions{AllowUnsigned: true})
	require.NoError(t, err)
	_, rc, err := lax.Get(ctx, legacy.ID)
	require.NoError(t, err)
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	rc.Close()
	require.Equal(t, "old", string(b))
}

func TestLocalRefusesLinksAndSpecialFiles(t *testing.T) {
	ctx := t.Context()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.tar")
	require.NoError(t, os.WriteFile(secret, []byte("hello"), 0o600))

	setups := map[string]func(t *testing.T, dir string){
		"content is a symlink": func(t *testing.T, dir string) {
			p := filepath.Join(dir, "ckpt-1.tar")
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Symlink(secret, p))
		},
		"content is a hard link": func(t *testing.T, dir string) {
			p := filepath.Join(dir, "ckpt-1.tar")
			require.NoError(t, os.Remove(p))
			other := filepath.Join(dir, "other")
			require.NoError(t, os.WriteFile(other, []byte("hello"), 0o600))
			require.NoError(t, os.Link(other, p))
		},
		"content is a fifo": func(t *testing.T, dir string) {
			p := filepath.Join(dir, "ckpt-1.tar")
			require.NoError(t, os.Remove(p))
			require.NoError(t, syscall.Mkfifo(p, 0o600))
		},
		"content is a directory": func(t *testing.T, dir string) {
			p := filepath.Join(dir, "ckpt-1.tar")
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Mkdir(p, 0o700))
		},
		"manifest is a symlink": func(t *testing.T, dir string) {
			p := filepath.Join(dir, "ckpt-1.json")
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			other := filepath.Join(outside, "m.json")
			require.NoError(t, os.WriteFile(other, b, 0o600))
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Symlink(other, p))
		},
	}
	for name, setup := range setups {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := NewLocal(dir)
			require.NoError(t, err)
			_, err = s.Put(ctx, validManifest(), strings.NewReader("hello"), nil)
			require.NoError(t, err)
			setup(t, s.Dir())
			_, rc, err := s.Get(ctx, "ckpt-1")
			if err == nil {
				rc.Close()
			}
			require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)
		})
	}
}

func TestLoadKeyring(t *testing.T) {
	dir := t.TempDir()
	secret := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, MinKeyBytes))
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	k, err := LoadKeyring(write("good", "# comment\n\nnew "+secret+"\nold "+secret+"\n", 0o600))
	require.NoError(t, err)
	require.Equal(t, "new", k.SigningKeyID())

	for name, p := range map[string]string{
		"group readable": write("group", "k "+secret+"\n", 0o640),
		"world readable": write("world", "k "+secret+"\n", 0o644),
		"short secret":   write("short", "k "+base64.StdEncoding.EncodeToString([]byte("short"))+"\n", 0o600),
		"not base64":     write("b64", "k !!!\n", 0o600),
		"empty":          write("empty", "# nothing\n", 0o600),
		"duplicate id":   write("dup", "k "+secret+"\nk "+secret+"\n", 0o600),
		"missing":        filepath.Join(dir, "missing"),
	} {
		_, err := LoadKeyring(p)
		require.Error(t, err, name)
	}
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(filepath.Join(dir, "good"), link))
	_, err = LoadKeyring(link)
	require.Error(t, err, "a symlinked key file is refused")
}

func TestLoadOrCreateLocalKeyring(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	k1, created, err := LoadOrCreateLocalKeyring(dir)
	require.NoError(t, err)
	require.True(t, created)
	fi, err := os.Stat(filepath.Join(dir, LocalKeyFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	k2, created, err := LoadOrCreateLocalKeyring(dir)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, k1, k2, "the key survives a restart")
}

func TestLoadOrCreateLocalKeyringConcurrently(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	rings := make(chan *Keyring, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			k, _, err := LoadOrCreateLocalKeyring(dir)
			rings <- k
			errs <- err
		}()
	}
	var first *Keyring
	for range n {
		require.NoError(t, <-errs)
		k := <-rings
		if first == nil {
			first = k
		}
		require.Equal(t, first, k, "every worker gets the same key")
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temp file is left")
}
