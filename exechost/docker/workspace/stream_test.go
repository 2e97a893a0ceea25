package workspace

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost/docker/runner"
	"github.com/agentflow/agentflow/exechost/docker/workspace/tartest"
)

// tarRunner stands in for the sandbox's tar: it counts execs and keeps what
// each read on stdin.
type tarRunner struct {
	execs int
	got   []byte
}

func (r *tarRunner) Run(_ context.Context, _ string, cmd runner.Command) (runner.Result, error) {
	r.execs++
	b, err := io.ReadAll(cmd.Stdin)
	r.got = b
	if err != nil {
		return runner.Result{ExitCode: 2}, err
	}
	return runner.Result{}, nil
}

// layerSource is one stored layer: it records whether it was opened, read
// to its end and closed.
type layerSource struct {
	data   []byte
	r      *bytes.Reader
	opened bool
	eof    bool
	closed int
}

func (l *layerSource) open(context.Context) (io.ReadCloser, error) {
	l.opened = true
	l.r = bytes.NewReader(l.data)
	return l, nil
}

func (l *layerSource) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if errors.Is(err, io.EOF) {
		l.eof = true
	}
	return n, err
}

func (l *layerSource) Close() error { l.closed++; return nil }

func sources(layers ...[]byte) ([]*layerSource, []Opener) {
	var src []*layerSource
	var open []Opener
	for _, b := range layers {
		s := &layerSource{data: b}
		src, open = append(src, s), append(open, s.open)
	}
	return src, open
}

// oldImport is what Import did before Prepare existed: every layer through
// one Filter into one stream, always with an exec.
func oldImport(l Limits, layers ...[]byte) ([]byte, Result, error) {
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	f := NewFilter(l)
	f.RecordNames()
	for _, b := range layers {
		if err := f.Copy(tw, bytes.NewReader(b)); err != nil {
			return nil, Result{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, Result{}, err
	}
	return out.Bytes(), Result{Bytes: f.Bytes(), Entries: f.Entries(), Names: f.Names()}, nil
}

var (
	markerOnly = tartest.Build()
	rootOnly   = tartest.Build(tartest.Entry{Name: "./", Type: tar.TypeDir})
	padded     = append(tartest.Build(), make([]byte, 10240-1024)...)
	dirOnly    = tartest.Build(tartest.Entry{Name: "d/", Type: tar.TypeDir})
	oneFile    = tartest.Build(tartest.Entry{Name: "f.txt", Type: tar.TypeReg, Body: "hi"})
)

func TestPrepareSkipsEmptyImports(t *testing.T) {
	tests := []struct {
		name    string
		layers  [][]byte
		entries int
	}{
		{name: "end-of-archive marker only", layers: [][]byte{markerOnly}},
		{name: "marker with record padding", layers: [][]byte{padded}},
		{name: "workspace root only", layers: [][]byte{rootOnly}, entries: 1},
		{name: "three empty layers", layers: [][]byte{markerOnly, rootOnly, padded}, entries: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, open := sources(tt.layers...)
			p, err := Prepare(t.Context(), big, open...)
			require.NoError(t, err)
			require.True(t, p.Empty())
			var r tarRunner
			res, err := p.Import(t.Context(), &r, "c", "1:1")
			require.NoError(t, err)
			require.Zero(t, r.execs, "nothing to unpack: no exec")
			require.Equal(t, tt.entries, res.Entries)
			require.Empty(t, res.Names)
			require.NotNil(t, res.Names, "names are recorded, as by an import that ran")
			for i, s := range src {
				require.True(t, s.eof, "layer %d read to its end (a verifying reader checks every byte)", i)
				require.Equal(t, 1, s.closed, "layer %d closed once", i)
			}
			p.Close()
			for _, s := range src {
				require.Equal(t, 1, s.closed)
			}
		})
	}
}

func TestPrepareStopsAtTheFirstEntry(t *testing.T) {
	src, open := sources(markerOnly, dirOnly, oneFile)
	p, err := Prepare(t.Context(), big, open...)
	require.NoError(t, err)
	require.False(t, p.Empty())
	require.True(t, src[0].eof && src[0].closed == 1, "the empty layer before it is verified and closed")
	require.True(t, src[1].opened && !src[1].eof && src[1].closed == 0, "the layer with the entry stays open")
	require.False(t, src[2].opened, "later layers wait for the import")

	var r tarRunner
	res, err := p.Import(t.Context(), &r, "c", "1:1")
	require.NoError(t, err)
	require.Equal(t, 1, r.execs)
	want, wantRes, err := oldImport(big, markerOnly, dirOnly, oneFile)
	require.NoError(t, err)
	require.Equal(t, want, r.got, "the same stream the import always sent")
	require.Equal(t, wantRes, res)
	for i, s := range src {
		require.True(t, s.eof, "layer %d read to its end", i)
		require.Equal(t, 1, s.closed, "layer %d closed once", i)
	}
	p.Close() // after Import: nothing left to close
	require.Equal(t, 1, src[1].closed)
}

func TestPendingCloseWithoutImport(t *testing.T) {
	src, open := sources(oneFile, oneFile)
	p, err := Prepare(t.Context(), big, open...)
	require.NoError(t, err)
	p.Close()
	p.Close()
	require.Equal(t, 1, src[0].closed)
	require.False(t, src[1].opened)
}

// TestPrepareMatchesImport: for every stream (and pairs of them, each
// order), Prepare + Import give exactly what one Import through the filter
// gave: the same bytes to tar, the same result, or an error of the same
// kind, and no exec when there is nothing to unpack.
func TestPrepareMatchesImport(t *testing.T) {
	streams := map[string][]byte{
		"marker only": markerOnly, "padded marker": padded, "root only": rootOnly, "dir only": dirOnly,
		"one file": oneFile, "good": tartest.Good(),
		"symlink to d": tartest.Build(tartest.Entry{Name: "l", Type: tar.TypeSymlink, Link: "d"}),
		"file under l": tartest.Build(tartest.Entry{Name: "l/x", Type: tar.TypeReg, Body: "x"}),
		"truncated":    tartest.Good()[:512+3],
		"unsafe first": tartest.Build(tartest.Entry{Name: "h", Type: tar.TypeLink, Link: "a"}),
		"root then unsafe": tartest.Build(tartest.Entry{Name: "./", Type: tar.TypeDir},
			tartest.Entry{Name: "l", Type: tar.TypeSymlink, Link: "/etc"}),
	}
	for name, s := range tartest.Malformed() {
		streams["malformed "+name] = s
	}
	kinds := []error{ErrMalformedArchive, ErrUnsafeEntry, ErrTooLarge}
	kind := func(err error) error {
		for _, k := range kinds {
			if errors.Is(err, k) {
				return k
			}
		}
		return err
	}
	limits := Limits{MaxBytes: 4 << 20, MaxEntries: 100}
	check := func(t *testing.T, layers ...[]byte) {
		want, wantRes, wantErr := oldImport(limits, layers...)
		_, open := sources(layers...)
		var r tarRunner
		var res Result
		p, err := Prepare(t.Context(), limits, open...)
		if err == nil {
			defer p.Close()
			res, err = p.Import(t.Context(), &r, "c", "1:1")
		}
		if wantErr != nil {
			require.Error(t, err)
			require.Equal(t, kind(wantErr), kind(err), "want %v, got %v", wantErr, err)
			return
		}
		require.NoError(t, err)
		require.Equal(t, wantRes, res)
		empty, _, _ := oldImport(limits)
		if bytes.Equal(want, empty) {
			require.Zero(t, r.execs)
			return
		}
		require.Equal(t, 1, r.execs)
		require.Equal(t, want, r.got)
	}
	for a, sa := range streams {
		t.Run(a, func(t *testing.T) { check(t, sa) })
		for b, sb := range streams {
			t.Run(a+" + "+b, func(t *testing.T) { check(t, sa, sb) })
		}
	}
}

func TestPrepareReportsLayerErrors(t *testing.T) {
	outage := errors.New("store unreachable")
	_, open := sources(markerOnly)
	open = append(open, func(context.Context) (io.ReadCloser, error) { return nil, outage })
	_, err := Prepare(t.Context(), big, open...)
	require.ErrorIs(t, err, outage)
	require.ErrorContains(t, err, "layer 1")

	// A source failing midway is itself, not a malformed archive.
	_, err = Prepare(t.Context(), big, func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(io.MultiReader(bytes.NewReader(markerOnly[:100]), brokenSource{outage})), nil
	})
	require.ErrorIs(t, err, outage)
	require.NotErrorIs(t, err, ErrMalformedArchive)
}
