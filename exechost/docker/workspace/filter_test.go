package workspace

import (
	"archive/tar"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"errors"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost/docker/workspace/tartest"
)

type entry struct {
	name     string
	typ      byte
	body     string
	link     string
	mode     int64
	size     int64 // overrides len(body) in the header when set
	noBody   bool
	sparseHd bool
}

func makeTar(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: mode, ModTime: time.Unix(1700000000, 0), Format: tar.FormatGNU}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		require.NoError(t, tw.WriteHeader(h))
		if e.typ == tar.TypeReg {
			_, err := io.WriteString(tw, e.body)
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

// rawHeader builds a tar stream by hand for headers archive/tar refuses to
// write (it is stricter on writing than on reading).
func rawTar(t *testing.T, name string, typ byte, link string, size int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "placeholder", Typeflag: tar.TypeReg, Size: 0, Mode: 0o644, Format: tar.FormatUSTAR}))
	require.NoError(t, tw.Close())
	b := buf.Bytes()
	hdr := b[:512]
	copy(hdr[0:100], name+"\x00")
	hdr[156] = typ
	copy(hdr[157:257], link)
	copy(hdr[124:136], []byte(strings.Repeat("0", 11-len(octal(size)))+octal(size)+"\x00"))
	// Recompute the checksum.
	for i := 148; i < 156; i++ {
		hdr[i] = ' '
	}
	var sum int64
	for _, c := range hdr {
		sum += int64(c)
	}
	copy(hdr[148:156], []byte(strings.Repeat("0", 6-len(octal(sum)))+octal(sum)+"\x00 "))
	return b
}

func octal(n int64) string {
	if n == 0 {
		return "0"
	}
	var s []byte
	for n > 0 {
		s = append([]byte{byte('0' + n%8)}, s...)
		n /= 8
	}
	return string(s)
}

func filterAll(t *testing.T, l Limits, layers ...[]byte) ([]*tar.Header, map[string]string, error) {
	t.Helper()
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	f := NewFilter(l)
	for _, layer := range layers {
		if err := f.Copy(tw, bytes.NewReader(layer)); err != nil {
			return nil, nil, err
		}
	}
	require.NoError(t, tw.Close())
	var hdrs []*tar.Header
	bodies := map[string]string{}
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		hdrs = append(hdrs, h)
		bodies[h.Name] = string(b)
	}
	return hdrs, bodies, nil
}

var big = Limits{MaxBytes: 1 << 20, MaxEntries: 100}

func TestFilterRefusesHostileEntries(t *testing.T) {
	tests := []struct {
		name   string
		layers [][]byte
		reason string
	}{
		{name: "dotdot", layers: [][]byte{makeTar(t, entry{name: "../evil", typ: tar.TypeReg, body: "x"})}, reason: ".."},
		{name: "dotdot inside", layers: [][]byte{makeTar(t, entry{name: "a/../../evil", typ: tar.TypeReg, body: "x"})}, reason: ".."},
		{name: "dotdot harmless-looking", layers: [][]byte{makeTar(t, entry{name: "a/../b", typ: tar.TypeReg, body: "x"})}, reason: ".."},
		{name: "absolute", layers: [][]byte{makeTar(t, entry{name: "/etc/passwd", typ: tar.TypeReg, body: "x"})}, reason: "absolute"},
		{name: "symlink absolute", layers: [][]byte{makeTar(t, entry{name: "l", typ: tar.TypeSymlink, link: "/etc"})}, reason: "absolute"},
		{name: "symlink up", layers: [][]byte{makeTar(t, entry{name: "a/l", typ: tar.TypeSymlink, link: "../../etc"})}, reason: "outside"},
		{name: "symlink parent", layers: [][]byte{makeTar(t, entry{name: "l", typ: tar.TypeSymlink, link: ".."})}, reason: "outside"},
		{name: "symlink disguised", layers: [][]byte{makeTar(t, entry{name: "l", typ: tar.TypeSymlink, link: "a/../../x"})}, reason: "after a name"},
		{name: "write through symlink", layers: [][]byte{makeTar(t,
			entry{name: "d", typ: tar.TypeDir, mode: 0o755},
			entry{name: "l", typ: tar.TypeSymlink, link: "d"},
			entry{name: "l/x", typ: tar.TypeReg, body: "x"})}, reason: "through symlink"},
		{name: "write through symlink of an earlier layer", layers: [][]byte{
			makeTar(t, entry{name: "l", typ: tar.TypeSymlink, link: "."}),
			makeTar(t, entry{name: "l/x", typ: tar.TypeReg, body: "x"})}, reason: "through symlink"},
		{name: "dir over symlink", layers: [][]byte{
			makeTar(t, entry{name: "l", typ: tar.TypeSymlink, link: "d"}),
			makeTar(t, entry{name: "l", typ: tar.TypeDir})}, reason: "replaces symlink"},
		{name: "hardlink", layers: [][]byte{makeTar(t, entry{name: "f", typ: tar.TypeReg, body: "x"}, entry{name: "h", typ: tar.TypeLink, link: "f"})}, reason: "hard link"},
		{name: "hardlink out", layers: [][]byte{makeTar(t, entry{name: "h", typ: tar.TypeLink, link: "/etc/shadow"})}, reason: "hard link"},
		{name: "char device", layers: [][]byte{makeTar(t, entry{name: "null", typ: tar.TypeChar})}, reason: "device"},
		{name: "block device", layers: [][]byte{makeTar(t, entry{name: "sda", typ: tar.TypeBlock})}, reason: "device"},
		{name: "fifo", layers: [][]byte{makeTar(t, entry{name: "p", typ: tar.TypeFifo})}, reason: "FIFO"},
		{name: "sparse", layers: [][]byte{rawTar(t, "s", tar.TypeGNUSparse, "", 0)}, reason: ""},
		{name: "unknown type", layers: [][]byte{rawTar(t, "u", 'Z', "", 0)}, reason: "unsupported"},
		{name: "root as file", layers: [][]byte{makeTar(t, entry{name: ".", typ: tar.TypeReg, body: ""})}, reason: "root"},
		{name: "NUL in name", layers: [][]byte{rawTar(t, "a\xffb", tar.TypeReg, "", 0)}, reason: "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := filterAll(t, big, tt.layers...)
			require.Error(t, err)
			if tt.name == "sparse" {
				// archive/tar may reject the malformed sparse map itself;
				// either way nothing passes.
				return
			}
			require.ErrorIs(t, err, ErrUnsafeEntry)
			require.ErrorContains(t, err, tt.reason)
		})
	}
}

func TestFilterBounds(t *testing.T) {
	_, _, err := filterAll(t, Limits{MaxBytes: 10, MaxEntries: 10}, makeTar(t, entry{name: "a", typ: tar.TypeReg, body: strings.Repeat("x", 11)}))
	require.ErrorIs(t, err, ErrTooLarge)

	_, _, err = filterAll(t, Limits{MaxBytes: 10, MaxEntries: 10},
		makeTar(t, entry{name: "a", typ: tar.TypeReg, body: "123456"}),
		makeTar(t, entry{name: "b", typ: tar.TypeReg, body: "123456"}))
	require.ErrorIs(t, err, ErrTooLarge, "bound is across layers")

	var many []entry
	for i := range 5 {
		many = append(many, entry{name: strings.Repeat("d", i+1), typ: tar.TypeDir})
	}
	_, _, err = filterAll(t, Limits{MaxBytes: 10, MaxEntries: 4}, makeTar(t, many...))
	require.ErrorIs(t, err, ErrTooLarge)

	// A header claiming more content than the stream bound allows is cut by
	// the bounded reader even before the content limit sees it.
	huge := rawTar(t, "h", tar.TypeReg, "", 1<<30)
	huge = append(huge, make([]byte, 64<<10)...)
	_, _, err = filterAll(t, Limits{MaxBytes: 1 << 40, MaxEntries: 1}, huge)
	require.Error(t, err)
}

func TestFilterNormalisesAndLayers(t *testing.T) {
	layer1 := makeTar(t,
		entry{name: "./", typ: tar.TypeDir, mode: 0o755},
		entry{name: "./bin/", typ: tar.TypeDir, mode: 0o500},
		entry{name: "./bin/run.sh", typ: tar.TypeReg, body: "#!/bin/sh\n", mode: 0o4755},
		entry{name: "./bin/latest", typ: tar.TypeSymlink, link: "run.sh"},
		entry{name: "./data/sub/up", typ: tar.TypeSymlink, link: "../../bin/run.sh"},
		entry{name: "./keep.txt", typ: tar.TypeReg, body: "one", mode: 0o600},
		entry{name: "./over", typ: tar.TypeSymlink, link: "keep.txt"},
	)
	layer2 := makeTar(t,
		entry{name: "keep.txt", typ: tar.TypeReg, body: "two", mode: 0o640},
		entry{name: "over", typ: tar.TypeReg, body: "file now"},
		entry{name: "over2/x", typ: tar.TypeReg, body: "ok"},
	)
	hdrs, bodies, err := filterAll(t, big, layer1, layer2)
	require.NoError(t, err)

	got := map[string]*tar.Header{}
	var names []string
	for _, h := range hdrs {
		got[h.Name] = h
		names = append(names, h.Name)
		require.Zero(t, h.Uid)
		require.Empty(t, h.Uname)
	}
	require.Equal(t, []string{"bin/", "bin/run.sh", "bin/latest", "data/sub/up", "keep.txt", "over", "keep.txt", "over", "over2/x"}, names)
	require.EqualValues(t, 0o700, got["bin/"].Mode, "dirs keep u+rwx")
	require.EqualValues(t, 0o755, got["bin/run.sh"].Mode, "setuid dropped")
	require.Equal(t, "run.sh", got["bin/latest"].Linkname)
	require.Equal(t, "two", bodies["keep.txt"])
	require.Equal(t, "file now", bodies["over"])
}

func TestBoundedReader(t *testing.T) {
	b, err := io.ReadAll(NewBoundedReader(strings.NewReader("12345"), 5))
	require.NoError(t, err)
	require.Equal(t, "12345", string(b))

	_, err = io.ReadAll(NewBoundedReader(strings.NewReader("123456"), 5))
	require.ErrorIs(t, err, ErrTooLarge)
}

func TestFilterRefusesSymlinkChains(t *testing.T) {
	tests := []struct {
		name    string
		entries []entry
	}{
		{"b -> . then d -> b/..", []entry{{name: "b", typ: tar.TypeSymlink, link: "."}, {name: "d", typ: tar.TypeSymlink, link: "b/.."}}},
		{"deep chain", []entry{{name: "a", typ: tar.TypeDir}, {name: "a/b", typ: tar.TypeSymlink, link: "."},
			{name: "a/d", typ: tar.TypeSymlink, link: "b/b/b/../.."}}},
		{"dot dot after a name", []entry{{name: "x/l", typ: tar.TypeSymlink, link: "./y/../.."}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFilter(Limits{MaxBytes: 1 << 20, MaxEntries: 100})
			var out bytes.Buffer
			err := f.Copy(tar.NewWriter(&out), bytes.NewReader(makeTar(t, tt.entries...)))
			require.ErrorIs(t, err, ErrUnsafeEntry)
		})
	}
	// Leading .. within the link's depth stays allowed (node_modules/.bin).
	f := NewFilter(Limits{MaxBytes: 1 << 20, MaxEntries: 100})
	require.NoError(t, f.Copy(tar.NewWriter(io.Discard), bytes.NewReader(makeTar(t,
		entry{name: "node_modules/.bin/tool", typ: tar.TypeSymlink, link: "../tool/bin/cli.js"}))))
}

func TestFilterRefusesMalformedArchives(t *testing.T) {
	for name, stream := range tartest.Malformed() {
		t.Run(name, func(t *testing.T) {
			f := NewFilter(Limits{MaxBytes: 4 << 20, MaxEntries: 100})
			err := f.Copy(tar.NewWriter(io.Discard), bytes.NewReader(stream))
			require.Error(t, err)
			t.Log(name, ": ", err)
			require.True(t, errors.Is(err, ErrMalformedArchive) || errors.Is(err, ErrUnsafeEntry) || errors.Is(err, ErrTooLarge),
				"untyped refusal: %v", err)
		})
	}
}

func TestFilterAcceptsRecordPadding(t *testing.T) {
	good := tartest.Good()
	for _, extra := range []int{0, 512, 10240 - len(good)} {
		stream := append(bytes.Clone(good), make([]byte, extra)...)
		f := NewFilter(Limits{MaxBytes: 1 << 20, MaxEntries: 100})
		require.NoError(t, f.Copy(tar.NewWriter(io.Discard), bytes.NewReader(stream)), "padding %d", extra)
	}
}

type brokenSource struct{ err error }

func (b brokenSource) Read([]byte) (int, error) { return 0, b.err }

func TestFilterReportsSourceErrorsAsThemselves(t *testing.T) {
	outage := errors.New("store unreachable")
	good := tartest.Good()
	for _, cut := range []int{0, 100, 512 + 2, len(good) - 10} {
		f := NewFilter(Limits{MaxBytes: 1 << 20, MaxEntries: 100})
		err := f.Copy(tar.NewWriter(io.Discard), io.MultiReader(bytes.NewReader(good[:cut]), brokenSource{outage}))
		require.ErrorIs(t, err, outage, "cut at %d", cut)
		require.NotErrorIs(t, err, ErrMalformedArchive, "cut at %d", cut)
	}
}
