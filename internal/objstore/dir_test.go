package objstore_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/objstore/objstoretest"
)

func TestConformanceMem(t *testing.T) {
	objstoretest.Run(t, func(*testing.T) objstore.Store { return objstore.NewMem() })
}

func TestConformanceDir(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store { return newDir(t, t.TempDir()) })
}

func newDir(t *testing.T, root string) *objstore.Dir {
	t.Helper()
	d, err := objstore.NewDir(root)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func TestDirLayout(t *testing.T) {
	root := t.TempDir()
	d := newDir(t, root)
	_, err := d.Put(t.Context(), "cp/af-1.tar", strings.NewReader("tar"), objstore.PutOptions{})
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "cp", "af-1.tar"))
	require.NoError(t, err)
	require.Equal(t, "tar", string(b))
	require.Equal(t, "dir "+root, d.String())
	// No temp file is left after a Put, successful or refused.
	_, err = d.Put(t.Context(), "cp/af-1.tar", strings.NewReader("again"), objstore.PutOptions{IfAbsent: true})
	require.ErrorIs(t, err, objstore.ErrExists)
	ents, err := os.ReadDir(filepath.Join(root, "cp"))
	require.NoError(t, err)
	require.Len(t, ents, 1)
}

// TestDirHostileTree: whoever else can write the directory plants links,
// FIFOs and devices; none of it is read as an object, none of it leads
// outside the root, and nothing blocks.
func TestDirHostileTree(t *testing.T) {
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600))
	root := t.TempDir()
	d := newDir(t, root)
	ctx := t.Context()
	_, err := d.Put(ctx, "ok/real", strings.NewReader("real"), objstore.PutOptions{})
	require.NoError(t, err)

	require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "ok", "link")))
	require.NoError(t, os.Symlink("real", filepath.Join(root, "ok", "inner-link")))
	require.NoError(t, os.Link(filepath.Join(outside, "secret"), filepath.Join(root, "ok", "hard")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(root, "ok", "fifo"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "escape")))
	require.NoError(t, os.Symlink("ok", filepath.Join(root, "alias")))

	for _, tc := range []struct {
		key  string
		want error
	}{
		{key: "ok/link", want: objstore.ErrNotRegular},
		{key: "ok/inner-link", want: objstore.ErrNotRegular},
		{key: "ok/hard", want: objstore.ErrNotRegular},
		{key: "ok/fifo", want: objstore.ErrNotRegular},
		{key: "escape/secret", want: objstore.ErrNotRegular},
	} {
		t.Run(tc.key, func(t *testing.T) {
			rc, err := d.Get(ctx, tc.key)
			if err == nil {
				b, _ := io.ReadAll(rc)
				rc.Close()
				t.Fatalf("get %s read %q", tc.key, b)
			}
			require.ErrorIs(t, err, tc.want)
			_, err = d.Stat(ctx, tc.key)
			require.ErrorIs(t, err, tc.want)
			require.NotErrorIs(t, err, objstore.ErrUnavailable)
		})
	}
	// A Put through the escaping directory link must not land outside.
	_, err = d.Put(ctx, "escape/planted", strings.NewReader("x"), objstore.PutOptions{})
	require.ErrorIs(t, err, objstore.ErrNotRegular)
	_, err = os.Stat(filepath.Join(outside, "planted"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	// A symlinked directory inside the root resolves inside the root.
	rc, err := d.Get(ctx, "alias/real")
	require.NoError(t, err)
	rc.Close()

	// List shows plain files only and never walks through a link.
	infos, err := d.List(ctx, "")
	require.NoError(t, err)
	var ks []string
	for _, i := range infos {
		ks = append(ks, i.Key)
	}
	require.Equal(t, []string{"ok/real"}, ks)
	// Deleting a planted link removes the link, not its target.
	require.NoError(t, d.Delete(ctx, "ok/link"))
	_, err = os.Stat(filepath.Join(outside, "secret"))
	require.NoError(t, err)
}

func TestDirSkipsStrayNames(t *testing.T) {
	root := t.TempDir()
	d := newDir(t, root)
	for _, name := range []string{".k.tmp-123", "sp ace", ".hidden"} {
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte("x"), 0o600))
	}
	_, err := d.Put(t.Context(), "k", strings.NewReader("v"), objstore.PutOptions{})
	require.NoError(t, err)
	infos, err := d.List(t.Context(), "")
	require.NoError(t, err)
	require.Len(t, infos, 1)
	require.Equal(t, "k", infos[0].Key)
}

func TestDirSweepTemp(t *testing.T) {
	root := t.TempDir()
	d := newDir(t, root)
	old := time.Now().Add(-2 * objstore.TempMaxAge)
	mk := func(rel string, mod time.Time) string {
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte("partial"), 0o600))
		require.NoError(t, os.Chtimes(p, mod, mod))
		return p
	}
	dead := []string{mk(".x.tar.tmp-1", old), mk("a/b/.y.json.tmp-abc", old)}
	live := mk("a/.z.tar.tmp-2", time.Now())
	kept := []string{mk("a/b/object", old), mk(".hidden-not-temp", old), live}

	n, err := d.SweepTemp(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for _, p := range dead {
		_, err := os.Stat(p)
		require.ErrorIs(t, err, fs.ErrNotExist, p)
	}
	for _, p := range kept {
		_, err := os.Stat(p)
		require.NoError(t, err, p)
	}
}

func TestDirPrefixOfObject(t *testing.T) {
	d := newDir(t, t.TempDir())
	ctx := t.Context()
	_, err := d.Put(ctx, "a/b", strings.NewReader("x"), objstore.PutOptions{})
	require.NoError(t, err)
	_, err = d.Put(ctx, "a/b/c", strings.NewReader("x"), objstore.PutOptions{})
	require.ErrorContains(t, err, "a parent of the key is an object")
	_, err = d.Put(ctx, "a", strings.NewReader("x"), objstore.PutOptions{})
	require.ErrorContains(t, err, "prefix of other objects")
	_, err = d.Get(ctx, "a")
	require.ErrorIs(t, err, objstore.ErrNotFound)
	require.NoError(t, d.Delete(ctx, "a"))
	rc, err := d.Get(ctx, "a/b")
	require.NoError(t, err)
	rc.Close()
}

// TestDirUnavailable: a store that cannot be written is an outage
// (StoreUnavailable, retried), with one short reason.
func TestDirUnavailable(t *testing.T) {
	if os.Geteuid() == 0 {
		// root ignores permission bits; the full-disk integration test
		// covers the mapping for real.
		t.Skip("permission bits do not bind root")
	}
	root := t.TempDir()
	d := newDir(t, root)
	require.NoError(t, os.Chmod(root, 0o500))
	t.Cleanup(func() { os.Chmod(root, 0o700) })
	_, err := d.Put(t.Context(), "k", strings.NewReader("v"), objstore.PutOptions{})
	requireUnavailable(t, err, "permission denied")
}

func requireUnavailable(t *testing.T, err error, reason string) {
	t.Helper()
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	require.ErrorIs(t, err, exechost.ErrStoreUnavailable)
	var ue *objstore.UnavailableError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, reason, ue.Reason)
	require.Equal(t, 1, strings.Count(err.Error(), reason), "reason stated once: %s", err)
}

func TestDirErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		errno  syscall.Errno
		reason string
	}{
		{errno: syscall.ENOSPC, reason: "no space left on device"},
		{errno: syscall.EDQUOT, reason: "disk quota exceeded"},
		{errno: syscall.EROFS, reason: "read-only file system"},
		{errno: syscall.EACCES, reason: "permission denied"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			err := objstore.DirError("dir /x", "put", "k", &fs.PathError{Op: "write", Path: ".k.tmp-1", Err: tc.errno})
			requireUnavailable(t, err, tc.reason)
			require.Equal(t, "object store dir /x unavailable: put k: "+tc.reason, err.Error())
		})
	}
	require.ErrorIs(t, objstore.DirError("d", "get", "k", &fs.PathError{Op: "open", Err: syscall.ENOENT}), objstore.ErrNotFound)
	other := objstore.DirError("d", "get", "k", errors.New("odd"))
	require.NotErrorIs(t, other, objstore.ErrUnavailable)
	require.ErrorContains(t, other, "odd")
}

// A Dir's DeletePrefix leaves no empty directory behind under the prefix,
// and leaves a directory that is not empty.
func TestDirDeletePrefixRemovesEmptyDirs(t *testing.T) {
	root := t.TempDir()
	d := newDir(t, root)
	for _, k := range []string{"a/r1/s/1/end", "a/r1/s/2/end", "a/r2/s/1/end"} {
		_, err := d.Put(t.Context(), k, strings.NewReader("x"), objstore.PutOptions{})
		require.NoError(t, err)
	}
	// A stray file that is not an object keeps its directory.
	require.NoError(t, os.WriteFile(filepath.Join(root, "a", "r2", "s", ".stray"), []byte("x"), 0o600))

	_, err := d.DeletePrefix(t.Context(), "a/r1/")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "a", "r1"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = d.DeletePrefix(t.Context(), "a/r2/")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "a", "r2", "s", ".stray"))
	require.NoError(t, err, "a directory with other entries stays")
	_, err = os.Stat(filepath.Join(root, "a"))
	require.NoError(t, err, "above the prefix nothing is removed")
}
