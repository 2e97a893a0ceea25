package webhook

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSignatureKnownAnswer(t *testing.T) {
	// Computed independently: printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac 'it-is-a-shared-secret'
	got := Signature([]byte("it-is-a-shared-secret"), time.Unix(1700000000, 0), []byte(`{"a":1}`))
	require.Equal(t, "sha256=8033f59bd824ec605aa4cbe962ace1581f156719be0df4e5fd27fc12ab43072a", got)
}

func TestVerify(t *testing.T) {
	secret := []byte("0123456789abcdef-secret")
	body := []byte(`{"event":"run.finished","status":"FAILED"}`)
	sent := time.Unix(1_800_000_000, 0)
	signed := func() http.Header {
		h := http.Header{}
		Sign(h, secret, sent, body)
		return h
	}
	tests := []struct {
		name    string
		header  func() http.Header
		body    []byte
		secret  []byte
		now     time.Time
		wantErr error
	}{
		{name: "valid", header: signed, body: body, secret: secret, now: sent.Add(time.Minute)},
		{name: "valid at the window's edge", header: signed, body: body, secret: secret, now: sent.Add(DefaultTolerance)},
		{name: "body changed", header: signed, body: append([]byte(" "), body...), secret: secret, now: sent, wantErr: ErrBadSignature},
		{name: "other secret", header: signed, body: body, secret: []byte("another-secret-0123"), now: sent, wantErr: ErrBadSignature},
		{name: "replayed late", header: signed, body: body, secret: secret, now: sent.Add(DefaultTolerance + time.Second), wantErr: ErrStale},
		{name: "from the future", header: signed, body: body, secret: secret, now: sent.Add(-DefaultTolerance - time.Second), wantErr: ErrStale},
		{name: "timestamp moved", header: func() http.Header {
			h := signed()
			h.Set(HeaderTimestamp, strconv.FormatInt(sent.Unix()+60, 10))
			return h
		}, body: body, secret: secret, now: sent, wantErr: ErrBadSignature},
		{name: "no prefix", header: func() http.Header {
			h := signed()
			h.Set(HeaderSignature, h.Get(HeaderSignature)[len("sha256="):])
			return h
		}, body: body, secret: secret, now: sent, wantErr: ErrBadSignature},
		{name: "not hex", header: func() http.Header {
			h := signed()
			h.Set(HeaderSignature, "sha256=zz")
			return h
		}, body: body, secret: secret, now: sent, wantErr: ErrBadSignature},
		{name: "unsigned", header: func() http.Header { return http.Header{} }, body: body, secret: secret, now: sent, wantErr: ErrMissingSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(tc.secret, tc.header(), tc.body, tc.now, 0)
			if tc.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.wantErr)
		})
	}
}

func TestSignIsFreshPerTimestamp(t *testing.T) {
	secret, body := []byte("0123456789abcdef"), []byte("{}")
	a, b := http.Header{}, http.Header{}
	Sign(a, secret, time.Unix(100, 0), body)
	Sign(b, secret, time.Unix(101, 0), body)
	require.NotEqual(t, a.Get(HeaderSignature), b.Get(HeaderSignature))
	require.NotEqual(t, a.Get(HeaderTimestamp), b.Get(HeaderTimestamp))
}

func TestLoadSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	good := write("good", "  0123456789abcdef-xyz\n", 0o600)
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(good, link))
	tests := []struct {
		name    string
		path    string
		want    string
		wantErr string
	}{
		{name: "0600, trimmed", path: good, want: "0123456789abcdef-xyz"},
		{name: "0400", path: write("ro", "0123456789abcdef", 0o400), want: "0123456789abcdef"},
		{name: "group readable", path: write("wide", "0123456789abcdef", 0o640), wantErr: "mode 0640, want 0600"},
		{name: "too short", path: write("short", "hunter2", 0o600), wantErr: "want at least 16"},
		{name: "symlink", path: link, wantErr: "webhook secret file"},
		{name: "missing", path: filepath.Join(dir, "nope"), wantErr: "no such file"},
		{name: "directory", path: dir, wantErr: "not a regular file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LoadSecret(tc.path)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.NotContains(t, err.Error(), "0123456789abcdef")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
}
