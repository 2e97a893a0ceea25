// Package objstoretest is the conformance suite every objstore.Store
// implementation passes: Run it with a constructor that returns an empty
// store. The same suite runs against Mem, Dir and S3 (MinIO), so the three
// agree on the contract written on objstore.Store.
package objstoretest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/objstore"
)

// BigSize is the size of the streamed object in the big-object test: more
// than one 16 MiB S3 part, so S3 goes through a multipart upload.
const BigSize = 20 << 20

// Run runs the suite; newStore returns an empty store for each subtest.
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	t.Run("PutGetStatDelete", func(t *testing.T) { testPutGetStatDelete(t, newStore(t)) })
	t.Run("Replace", func(t *testing.T) { testReplace(t, newStore(t)) })
	t.Run("IfAbsent", func(t *testing.T) { testIfAbsent(t, newStore(t)) })
	t.Run("IfAbsentRace", func(t *testing.T) { testIfAbsentRace(t, newStore(t)) })
	t.Run("NoSync", func(t *testing.T) { testNoSync(t, newStore(t)) })
	t.Run("CanceledPut", func(t *testing.T) { testCanceledPut(t, newStore(t)) })
	t.Run("FailingReader", func(t *testing.T) { testFailingReader(t, newStore(t)) })
	t.Run("InvalidKeys", func(t *testing.T) { testInvalidKeys(t, newStore(t)) })
	t.Run("BigUnknownSize", func(t *testing.T) { testBig(t, newStore(t)) })
	t.Run("List", func(t *testing.T) { testList(t, newStore(t)) })
	t.Run("Sub", func(t *testing.T) { testSub(t, newStore(t)) })
	t.Run("DeletePrefix", func(t *testing.T) { testDeletePrefix(t, newStore(t)) })
}

// testDeletePrefix: whole segments only, sizes of what it removed, nothing
// else touched, the prefix usable again, through a Sub too.
func testDeletePrefix(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	put(t, s, "ag/run-1/step/1/000000.a.chunk", "12345")
	put(t, s, "ag/run-1/step/1/end", "{}")
	put(t, s, "ag/run-1/step/2.json", "abc")
	put(t, s, "ag/run-10/step/1/end", "keep") // "ag/run-1" must not match it
	put(t, s, "ag/run-2.json", "keep")

	for _, bad := range []string{"", "ag/run-1", "/", "ag//", "../x/"} {
		_, err := s.DeletePrefix(ctx, bad)
		require.ErrorIs(t, err, objstore.ErrInvalidKey, "prefix %q", bad)
	}
	removed, err := s.DeletePrefix(ctx, "ag/run-1/")
	require.NoError(t, err)
	require.Equal(t, []string{"ag/run-1/step/1/000000.a.chunk", "ag/run-1/step/1/end", "ag/run-1/step/2.json"}, keys(removed))
	var n int64
	for _, in := range removed {
		n += in.Size
	}
	require.Equal(t, int64(5+2+3), n, "sizes of the removed objects")

	all, err := s.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"ag/run-10/step/1/end", "ag/run-2.json"}, keys(all))

	// Nothing left: an empty answer, no error; the prefix takes objects again.
	removed, err = s.DeletePrefix(ctx, "ag/run-1/")
	require.NoError(t, err)
	require.Empty(t, removed)
	put(t, s, "ag/run-1/step/1/end", "again")
	require.Equal(t, "again", get(t, s, "ag/run-1/step/1/end"))

	// An object named like the prefix without its slash is not under it.
	removed, err = s.DeletePrefix(ctx, "ag/run-2.json/")
	require.NoError(t, err)
	require.Empty(t, removed)
	require.Equal(t, "keep", get(t, s, "ag/run-2.json"))

	sub := objstore.Sub(s, "ag")
	removed, err = sub.DeletePrefix(ctx, "run-10/")
	require.NoError(t, err)
	require.Equal(t, []string{"run-10/step/1/end"}, keys(removed))
	_, err = s.Stat(ctx, "ag/run-10/step/1/end")
	require.ErrorIs(t, err, objstore.ErrNotFound)
}

// testNoSync: NoSync changes nothing a reader sees while the machine runs
// (what it skips, the fsyncs, only shows after a crash): the object is
// stored in a new and in an existing directory, IfAbsent still refuses a
// taken key, a replace replaces, and nothing else is left in the store.
func testNoSync(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	noSync := func(key, body string, ifAbsent bool) error {
		_, err := s.Put(ctx, key, strings.NewReader(body), objstore.PutOptions{Size: int64(len(body)), NoSync: true, IfAbsent: ifAbsent})
		return err
	}
	require.NoError(t, noSync("ag/run/step/1/000000.a.chunk", "", true))
	require.NoError(t, noSync("ag/run/step/1/000001.a.chunk", "line\n", true))
	require.ErrorIs(t, noSync("ag/run/step/1/000001.a.chunk", "other", true), objstore.ErrExists)
	require.NoError(t, noSync("ag/run/step/1/end", "{}", false))
	require.NoError(t, noSync("ag/run/step/1/end", `{"v":1}`, false))

	require.Equal(t, "", get(t, s, "ag/run/step/1/000000.a.chunk"))
	require.Equal(t, "line\n", get(t, s, "ag/run/step/1/000001.a.chunk"))
	require.Equal(t, `{"v":1}`, get(t, s, "ag/run/step/1/end"))
	all, err := s.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"ag/run/step/1/000000.a.chunk", "ag/run/step/1/000001.a.chunk", "ag/run/step/1/end"}, keys(all))
}

func put(t *testing.T, s objstore.Store, key, body string) objstore.Info {
	t.Helper()
	info, err := s.Put(t.Context(), key, strings.NewReader(body), objstore.PutOptions{Size: int64(len(body))})
	require.NoError(t, err, "put %s", key)
	return info
}

func get(t *testing.T, s objstore.Store, key string) string {
	t.Helper()
	rc, err := s.Get(t.Context(), key)
	require.NoError(t, err, "get %s", key)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err, "read %s", key)
	return string(b)
}

func keys(infos []objstore.Info) []string {
	out := []string{}
	for _, i := range infos {
		out = append(out, i.Key)
	}
	return out
}

func testPutGetStatDelete(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	info := put(t, s, "a/b/c.json", `{"x":1}`)
	require.Equal(t, "a/b/c.json", info.Key)
	require.EqualValues(t, 7, info.Size)
	require.False(t, info.ModTime.IsZero())
	require.Equal(t, `{"x":1}`, get(t, s, "a/b/c.json"))

	st, err := s.Stat(ctx, "a/b/c.json")
	require.NoError(t, err)
	require.Equal(t, "a/b/c.json", st.Key)
	require.EqualValues(t, 7, st.Size)

	// An empty object is an object.
	put(t, s, "empty", "")
	require.Equal(t, "", get(t, s, "empty"))

	// Missing keys, including the "directory" of an existing key.
	for _, k := range []string{"nope", "a/b", "a/b/c.json/d", "a/b/c.jso"} {
		_, err = s.Get(ctx, k)
		require.ErrorIs(t, err, objstore.ErrNotFound, "get %s", k)
		_, err = s.Stat(ctx, k)
		require.ErrorIs(t, err, objstore.ErrNotFound, "stat %s", k)
	}

	require.NoError(t, s.Delete(ctx, "a/b/c.json"))
	_, err = s.Stat(ctx, "a/b/c.json")
	require.ErrorIs(t, err, objstore.ErrNotFound)
	_, err = s.Get(ctx, "a/b/c.json")
	require.ErrorIs(t, err, objstore.ErrNotFound)
	// Deleting what is not there is not an error.
	require.NoError(t, s.Delete(ctx, "a/b/c.json"))
	require.NoError(t, s.Delete(ctx, "never/was"))
	require.NotEmpty(t, s.String())
}

func testReplace(t *testing.T, s objstore.Store) {
	put(t, s, "k", "first")
	info := put(t, s, "k", "second, longer")
	require.EqualValues(t, len("second, longer"), info.Size)
	require.Equal(t, "second, longer", get(t, s, "k"))
	// Unknown size (Size 0) too.
	_, err := s.Put(t.Context(), "k", strings.NewReader("third"), objstore.PutOptions{})
	require.NoError(t, err)
	require.Equal(t, "third", get(t, s, "k"))
}

func testIfAbsent(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	_, err := s.Put(ctx, "once", strings.NewReader("mine"), objstore.PutOptions{IfAbsent: true})
	require.NoError(t, err)
	_, err = s.Put(ctx, "once", strings.NewReader("theirs"), objstore.PutOptions{IfAbsent: true})
	require.ErrorIs(t, err, objstore.ErrExists)
	require.Equal(t, "mine", get(t, s, "once"), "a refused IfAbsent put must not change the object")
	infos, err := s.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"once"}, keys(infos), "a refused IfAbsent put must leave nothing behind")
}

func testIfAbsentRace(t *testing.T, s objstore.Store) {
	const n = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []int
		errs    []error
	)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := s.Put(t.Context(), "race/result.json", strings.NewReader(fmt.Sprintf("writer %d", i)),
				objstore.PutOptions{IfAbsent: true})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, i)
			case !errors.Is(err, objstore.ErrExists):
				errs = append(errs, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Empty(t, errs)
	require.Len(t, winners, 1, "exactly one IfAbsent writer wins")
	require.Equal(t, fmt.Sprintf("writer %d", winners[0]), get(t, s, "race/result.json"))
}

// cancelingReader yields half of its data, cancels the Put's context, then
// keeps yielding: the Put must fail and leave nothing.
type cancelingReader struct {
	cancel context.CancelFunc
	left   int
	half   int
}

func (r *cancelingReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.left, 64<<10)
	for i := range p[:n] {
		p[i] = 'x'
	}
	r.left -= n
	if r.left <= r.half {
		r.cancel()
	}
	return n, nil
}

func testCanceledPut(t *testing.T, s objstore.Store) {
	for _, tc := range []struct {
		name string
		size int
		opts objstore.PutOptions
	}{
		{name: "small unknown size", size: 256 << 10},
		{name: "big unknown size", size: BigSize},
		{name: "known size", size: 1 << 20, opts: objstore.PutOptions{Size: 1 << 20}},
		{name: "if absent", size: 256 << 10, opts: objstore.PutOptions{IfAbsent: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			key := "canceled/" + strings.ReplaceAll(tc.name, " ", "-")
			_, err := s.Put(ctx, key, &cancelingReader{cancel: cancel, left: tc.size, half: tc.size / 2}, tc.opts)
			require.Error(t, err)
			require.ErrorIs(t, err, context.Canceled)
			_, err = s.Stat(t.Context(), key)
			require.ErrorIs(t, err, objstore.ErrNotFound, "a canceled put must not be visible")
			infos, err := s.List(t.Context(), "canceled/")
			require.NoError(t, err)
			require.Empty(t, infos)
		})
	}
	// Already canceled: nothing is written either.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.Put(ctx, "canceled/before", strings.NewReader("x"), objstore.PutOptions{})
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.Stat(t.Context(), "canceled/before")
	require.ErrorIs(t, err, objstore.ErrNotFound)
}

type failingReader struct{ n int }

var errSource = errors.New("source broke")

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errSource
	}
	n := min(len(p), r.n)
	r.n -= n
	return n, nil
}

func testFailingReader(t *testing.T, s objstore.Store) {
	put(t, s, "f", "old")
	_, err := s.Put(t.Context(), "f", &failingReader{n: 1000}, objstore.PutOptions{})
	require.ErrorIs(t, err, errSource, "the source's error is the caller's, returned as is")
	require.NotErrorIs(t, err, objstore.ErrUnavailable, "a failing source is not a store outage")
	require.Equal(t, "old", get(t, s, "f"), "a failed put leaves the old object")
}

func testInvalidKeys(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	for _, k := range []string{"", "/abs", "a/../../etc/passwd", "..", "a//b", "a/", ".tmp-x", "a/.hidden", "sp ace", "new\nline", "back\\slash"} {
		_, err := s.Put(ctx, k, strings.NewReader("x"), objstore.PutOptions{})
		require.ErrorIs(t, err, objstore.ErrInvalidKey, "put %q", k)
		_, err = s.Get(ctx, k)
		require.ErrorIs(t, err, objstore.ErrInvalidKey, "get %q", k)
		_, err = s.Stat(ctx, k)
		require.ErrorIs(t, err, objstore.ErrInvalidKey, "stat %q", k)
		require.ErrorIs(t, s.Delete(ctx, k), objstore.ErrInvalidKey, "delete %q", k)
	}
	for _, p := range []string{"/abs", "../x", "a//"} {
		_, err := s.List(ctx, p)
		require.ErrorIs(t, err, objstore.ErrInvalidKey, "list %q", p)
	}
	infos, err := s.List(ctx, "")
	require.NoError(t, err)
	require.Empty(t, infos, "refused keys leave nothing")
}

// pattern is a deterministic, non-repeating-per-block byte stream.
type pattern struct{ off, size int64 }

func (p *pattern) Read(b []byte) (int, error) {
	if p.off >= p.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(b)), p.size-p.off))
	for i := range n {
		x := p.off + int64(i)
		b[i] = byte(x ^ x>>8 ^ x>>16)
	}
	p.off += int64(n)
	return n, nil
}

func testBig(t *testing.T, s objstore.Store) {
	want := sha256.New()
	_, _ = io.Copy(want, &pattern{size: BigSize})
	// Unknown size: hidden behind a reader that is not a *bytes.Reader etc.
	info, err := s.Put(t.Context(), "big/blob.tar", io.MultiReader(&pattern{size: BigSize}), objstore.PutOptions{})
	require.NoError(t, err)
	require.EqualValues(t, BigSize, info.Size)
	st, err := s.Stat(t.Context(), "big/blob.tar")
	require.NoError(t, err)
	require.EqualValues(t, BigSize, st.Size)
	rc, err := s.Get(t.Context(), "big/blob.tar")
	require.NoError(t, err)
	defer rc.Close()
	got := sha256.New()
	n, err := io.Copy(got, rc)
	require.NoError(t, err)
	require.EqualValues(t, BigSize, n)
	require.Equal(t, want.Sum(nil), got.Sum(nil))

	// And with IfAbsent: a second big upload of the same key is refused.
	_, err = s.Put(t.Context(), "big/blob.tar", io.MultiReader(&pattern{size: BigSize}), objstore.PutOptions{IfAbsent: true})
	require.ErrorIs(t, err, objstore.ErrExists)
}

func testList(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	all := []string{"b", "a/b/c", "a/bc", "a/b", "ab", "a-b", "a/b/d/e", "z/1", "a.b", "A"}
	for _, k := range all {
		if k == "a/b" {
			continue // "a/b" is a prefix of "a/b/c": a file tree cannot hold both
		}
		put(t, s, k, k)
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{prefix: "", want: []string{"A", "a-b", "a.b", "a/b/c", "a/b/d/e", "a/bc", "ab", "b", "z/1"}},
		{prefix: "a", want: []string{"a-b", "a.b", "a/b/c", "a/b/d/e", "a/bc", "ab"}},
		{prefix: "a/", want: []string{"a/b/c", "a/b/d/e", "a/bc"}},
		{prefix: "a/b", want: []string{"a/b/c", "a/b/d/e", "a/bc"}},
		{prefix: "a/b/", want: []string{"a/b/c", "a/b/d/e"}},
		{prefix: "a/b/d/e", want: []string{"a/b/d/e"}},
		{prefix: "a/b/c/", want: []string{}},
		{prefix: "a/b/c/x", want: []string{}},
		{prefix: "nothing", want: []string{}},
		{prefix: "nothing/", want: []string{}},
		{prefix: "z", want: []string{"z/1"}},
	} {
		infos, err := s.List(ctx, tc.prefix)
		require.NoError(t, err, "list %q", tc.prefix)
		require.Equal(t, tc.want, keys(infos), "list %q", tc.prefix)
		for _, i := range infos {
			require.EqualValues(t, len(i.Key), i.Size, "size of %s", i.Key)
			require.False(t, i.ModTime.IsZero())
		}
	}
}

func testSub(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	put(t, s, "outside", "o")
	cp := objstore.Sub(s, "root/checkpoints")
	put(t, cp, "x.tar", "tar")
	put(t, cp, "x.json", "json")
	infos, err := cp.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"x.json", "x.tar"}, keys(infos))
	require.Equal(t, "tar", get(t, s, "root/checkpoints/x.tar"))
	_, err = cp.Get(ctx, "../../outside")
	require.ErrorIs(t, err, objstore.ErrInvalidKey)
	var buf bytes.Buffer
	rc, err := cp.Get(ctx, "x.json")
	require.NoError(t, err)
	_, err = io.Copy(&buf, rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.Equal(t, "json", buf.String())
}
