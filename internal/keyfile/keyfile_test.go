package keyfile

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	secret := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	need32 := func(k Key) error {
		if len(k.Secret) != 32 {
			return errors.New("want 32 bytes")
		}
		return nil
	}

	keys, err := Load(write("good", "# comment\n\n  new "+secret+"  \nold\t"+secret+"\n", 0o600), need32)
	require.NoError(t, err)
	require.Len(t, keys, 2)
	require.Equal(t, Key{ID: "new", Secret: bytes.Repeat([]byte{7}, 32), Line: 3}, keys[0])
	require.Equal(t, "old", keys[1].ID)
	require.Equal(t, 4, keys[1].Line)

	readOnly, err := Load(write("ro", "k "+secret+"\n", 0o400), nil)
	require.NoError(t, err, "0400 is fine")
	require.Len(t, readOnly, 1)

	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(filepath.Join(dir, "good"), link))

	tests := []struct {
		name string
		path string
		line int    // > 0: an *Error on this line
		want string // in the message
		is   error
	}{
		{name: "group readable", path: write("group", "k "+secret+"\n", 0o640), want: "mode 0640, want 0600"},
		{name: "world readable", path: write("world", "k "+secret+"\n", 0o604), want: "mode 0604"},
		{name: "symlink", path: link, want: "symlink"},
		{name: "directory", path: dir, want: "not a regular file"},
		{name: "missing", path: filepath.Join(dir, "missing"), is: os.ErrNotExist},
		{name: "empty", path: write("empty", "# nothing\n\n", 0o600), is: ErrNoKey},
		{name: "one field", path: write("one", "# c\nk\n", 0o600), line: 2, want: `want "<key-id> <base64 secret>"`},
		{name: "three fields", path: write("three", "k "+secret+" extra\n", 0o600), line: 1},
		{name: "bad id", path: write("badid", "-k "+secret+"\n", 0o600), line: 1, want: `key id "-k"`},
		{name: "duplicate id", path: write("dup", "k "+secret+"\n\nk "+secret+"\n", 0o600), line: 3, want: "already on line 1"},
		{name: "not base64", path: write("b64", "k !!!\n", 0o600), line: 1, want: "not base64"},
		{name: "check fails", path: write("short", "a "+secret+"\nk "+base64.StdEncoding.EncodeToString([]byte("short"))+"\n", 0o600), line: 2, want: "want 32 bytes"},
		{name: "overlong line", path: write("long", "k "+string(bytes.Repeat([]byte("A"), 5000))+"\n", 0o600), line: 1, want: "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.path, need32)
			require.Error(t, err)
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
			if tt.line > 0 {
				var le *Error
				require.ErrorAs(t, err, &le)
				require.Equal(t, tt.path, le.Path)
				require.Equal(t, tt.line, le.Line)
			}
			require.Contains(t, err.Error(), tt.want)
			require.NotContains(t, err.Error(), secret, "a secret never appears in an error")
		})
	}
}

func TestCheckID(t *testing.T) {
	for _, ok := range []string{"a", "k1", "2026-12.codec_key", string(bytes.Repeat([]byte("x"), 64))} {
		require.NoError(t, CheckID(ok), ok)
	}
	for _, bad := range []string{"", "-a", ".a", "a b", "a/b", "ä", string(bytes.Repeat([]byte("x"), 65))} {
		require.Error(t, CheckID(bad), bad)
	}
}
