//go:build integration

package docker_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type tarEntry struct {
	name, body, link, hardlink string
	dir                        bool
	dev                        byte
}

func makeTar(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, ModTime: time.Unix(1700000000, 0), Format: tar.FormatGNU}
		switch {
		case e.dir:
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		case e.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
		case e.hardlink != "":
			h.Typeflag, h.Linkname = tar.TypeLink, e.hardlink
		case e.dev != 0:
			h.Typeflag = e.dev
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		require.NoError(t, tw.WriteHeader(h))
		if h.Typeflag == tar.TypeReg {
			_, err := io.WriteString(tw, e.body)
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }
