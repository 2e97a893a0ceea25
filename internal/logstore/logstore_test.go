package logstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentflow/agentflow/internal/objstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// flaky is a Mem whose outage can be switched while a Writer's goroutine
// uses it (Mem.Fail is not safe to set concurrently).
type flaky struct {
	*objstore.Mem
	mu   sync.Mutex
	down bool
	puts int
}

func newFlaky() *flaky { return &flaky{Mem: objstore.NewMem()} }

func (f *flaky) setDown(d bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = d
}

func (f *flaky) err(op, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.down {
		return nil
	}
	return &objstore.UnavailableError{Store: "flaky", Op: op, Key: key, Reason: "connection refused"}
}

func (f *flaky) Put(ctx context.Context, key string, r io.Reader, o objstore.PutOptions) (objstore.Info, error) {
	if err := f.err("put", key); err != nil {
		return objstore.Info{}, err
	}
	f.mu.Lock()
	f.puts++
	f.mu.Unlock()
	return f.Mem.Put(ctx, key, r, o)
}

func (f *flaky) List(ctx context.Context, prefix string) ([]objstore.Info, error) {
	if err := f.err("list", prefix); err != nil {
		return nil, err
	}
	return f.Mem.List(ctx, prefix)
}

func (f *flaky) Stat(ctx context.Context, key string) (objstore.Info, error) {
	if err := f.err("stat", key); err != nil {
		return objstore.Info{}, err
	}
	return f.Mem.Stat(ctx, key)
}

// slowFlush keeps the background flusher out of a test: only ChunkBytes
// and Close store anything.
var slowFlush = Options{FlushInterval: time.Hour}

var key1 = Key{AgentID: "news-1", RunID: "r1", StepID: "fetch", Attempt: 1}

func put(t *testing.T, s objstore.Store, key, data string) {
	t.Helper()
	_, err := s.Put(t.Context(), key, strings.NewReader(data), objstore.PutOptions{})
	require.NoError(t, err)
}

func TestWriteCloseReadListTail(t *testing.T) {
	mem := objstore.NewMem()
	s := New(mem, slowFlush)
	ctx := t.Context()

	_, err := s.Read(ctx, key1, 0)
	require.ErrorIs(t, err, ErrNotFound)

	w, err := s.Open(ctx, key1)
	require.NoError(t, err)
	// Open stores chunk 0 at once: the attempt is visible as running.
	entries, err := s.List(ctx, "news-1")
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, key1, entries[0].Key)
	require.False(t, entries[0].Finished)

	_, err = io.WriteString(w, "hello ")
	require.NoError(t, err)
	_, err = io.WriteString(w, "world\n")
	require.NoError(t, err)
	require.NoError(t, w.Close(ctx, Trailer{Text: []byte("--- agentflow: done\n"), Outcome: "success"}))
	_, err = w.Write([]byte("late"))
	require.ErrorIs(t, err, ErrClosed)

	got, err := s.Read(ctx, key1, 0)
	require.NoError(t, err)
	require.Equal(t, "hello world\n--- agentflow: done\n", string(got))
	got, err = s.Read(ctx, key1, 6)
	require.NoError(t, err)
	require.Equal(t, "done\n", string(got)[1:])

	entries, err = s.List(ctx, "news-1")
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.True(t, entries[0].Finished)
	require.Equal(t, int64(len("hello world\n--- agentflow: done\n")), entries[0].Size)

	// The layout every reader relies on.
	infos, err := mem.List(ctx, "")
	require.NoError(t, err)
	var names []string
	for _, i := range infos {
		names = append(names, i.Key)
	}
	require.Len(t, names, 3)
	require.Regexp(t, `^news-1/r1/fetch/1/000000\.[0-9a-f]{16}\.chunk$`, names[0])
	require.Regexp(t, `^news-1/r1/fetch/1/000001\.[0-9a-f]{16}\.chunk$`, names[1])
	require.Equal(t, "news-1/r1/fetch/1/end", names[2])
	rc, err := mem.Get(ctx, names[2])
	require.NoError(t, err)
	m, err := decodeEnd(rc)
	require.NoError(t, rc.Close())
	require.NoError(t, err)
	require.Equal(t, 2, m.Chunks)
	require.Equal(t, "success", m.Outcome)
	require.Equal(t, entries[0].Size, m.Bytes)
}

func TestChunksReachTheStoreBeforeClose(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		data string
	}{
		// Nothing but the interval can store these bytes.
		{name: "flush interval", opts: Options{FlushInterval: 10 * time.Millisecond}, data: "line 1\n"},
		// Nothing but the size can: the interval never fires in the test.
		{name: "chunk size", opts: Options{FlushInterval: time.Hour, ChunkBytes: 8}, data: "0123456789abcdef"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(objstore.NewMem(), tc.opts)
			w, err := s.Open(t.Context(), key1)
			require.NoError(t, err)
			_, err = io.WriteString(w, tc.data)
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				got, err := s.Read(t.Context(), key1, 0)
				return err == nil && string(got) == tc.data
			}, time.Minute, 5*time.Millisecond)
			require.NoError(t, w.Close(t.Context(), Trailer{}))
		})
	}
}

func TestChunksAreBounded(t *testing.T) {
	mem := objstore.NewMem()
	s := New(mem, Options{FlushInterval: time.Hour, ChunkBytes: 4})
	w, err := s.Open(t.Context(), key1)
	require.NoError(t, err)
	_, err = io.WriteString(w, "abcdefghij")
	require.NoError(t, err)
	require.NoError(t, w.Close(t.Context(), Trailer{}))
	infos, err := mem.List(t.Context(), key1.prefix()+"/")
	require.NoError(t, err)
	require.Len(t, infos, 5) // chunk 0 (empty), three chunks, end
	for _, i := range infos[:4] {
		require.LessOrEqual(t, i.Size, int64(4), i.Key)
	}
	got, err := s.Read(t.Context(), key1, 0)
	require.NoError(t, err)
	require.Equal(t, "abcdefghij", string(got))
}

// syncBuffer is a bytes.Buffer Follow writes to while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestFollowShowsLinesWhileRunningAndEndsAtEnd(t *testing.T) {
	s := New(objstore.NewMem(), Options{FlushInterval: 5 * time.Millisecond})
	w, err := s.Open(t.Context(), key1)
	require.NoError(t, err)

	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- s.Follow(t.Context(), key1, &out, FollowOptions{Poll: 5 * time.Millisecond}) }()

	_, err = io.WriteString(w, "first line\n")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return out.String() == "first line\n" }, time.Minute, 5*time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Follow returned before the end marker: %v", err)
	default:
	}
	_, err = io.WriteString(w, "second line\n")
	require.NoError(t, err)
	require.NoError(t, w.Close(t.Context(), Trailer{Text: []byte("trailer\n")}))
	require.NoError(t, <-done)
	require.Equal(t, "first line\nsecond line\ntrailer\n", out.String())
}

func TestFollowStopAndTail(t *testing.T) {
	s := New(objstore.NewMem(), slowFlush)
	w, err := s.Open(t.Context(), key1)
	require.NoError(t, err)
	_, err = io.WriteString(w, "a\nb\nc\n")
	require.NoError(t, err)
	require.NoError(t, w.Flush(t.Context()))

	// The writer died (no end marker); Stop says the run moved on.
	var out bytes.Buffer
	asked := 0
	err = s.Follow(t.Context(), key1, &out, FollowOptions{Poll: time.Millisecond, TailLines: 2,
		Stop: func(context.Context) (bool, error) { asked++; return asked > 1, nil }})
	require.ErrorIs(t, err, ErrStopped)
	require.Equal(t, "b\nc\n", out.String())

	// Stop's error ends Follow.
	boom := errors.New("describe failed")
	err = s.Follow(t.Context(), key1, io.Discard, FollowOptions{Stop: func(context.Context) (bool, error) { return false, boom }})
	require.ErrorIs(t, err, boom)
	require.NoError(t, w.Close(t.Context(), Trailer{}))

	// A canceled context ends it too.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	k2 := key1
	k2.Attempt = 2
	w2, err := s.Open(t.Context(), k2)
	require.NoError(t, err)
	require.ErrorIs(t, s.Follow(ctx, k2, io.Discard, FollowOptions{}), context.Canceled)
	require.NoError(t, w2.Close(t.Context(), Trailer{}))
}

func TestRedeliveryLatestOpenWinsNeverInterleaves(t *testing.T) {
	mem := objstore.NewMem()
	s := New(mem, slowFlush)
	ctx := t.Context()

	old, err := s.Open(ctx, key1)
	require.NoError(t, err)
	_, err = io.WriteString(old, "old delivery 1\n")
	require.NoError(t, err)
	require.NoError(t, old.Flush(ctx))

	// A follower of the old delivery moves to the new one, saying so.
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- s.Follow(ctx, key1, &out, FollowOptions{Poll: time.Millisecond}) }()
	require.Eventually(t, func() bool { return out.String() == "old delivery 1\n" }, time.Minute, time.Millisecond)

	cur, err := s.Open(ctx, key1) // the re-delivery: deletes what the old one stored
	require.NoError(t, err)
	_, err = io.WriteString(old, "old delivery 2\n") // the old one is still alive
	require.NoError(t, err)
	require.NoError(t, old.Flush(ctx))
	_, err = io.WriteString(cur, "new delivery\n")
	require.NoError(t, err)

	require.ErrorIs(t, old.Close(ctx, Trailer{Text: []byte("old end\n")}), ErrSuperseded)
	require.NoError(t, cur.Close(ctx, Trailer{Text: []byte("new end\n")}))
	require.NoError(t, <-done)
	require.Contains(t, out.String(), "old delivery 1\n")
	require.Contains(t, out.String(), "delivered again")
	require.True(t, strings.HasSuffix(out.String(), "new delivery\nnew end\n"), out.String())

	got, err := s.Read(ctx, key1, 0)
	require.NoError(t, err)
	require.NotContains(t, string(got), "old delivery")
	require.Contains(t, string(got), "ignored") // the old writer's late chunks are named, not shown
	require.True(t, strings.HasSuffix(string(got), "new delivery\nnew end\n"), string(got))
}

func TestStoreOutageNeverFailsWrites(t *testing.T) {
	f := newFlaky()
	s := New(f, Options{FlushInterval: time.Millisecond, MaxBuffered: 32})
	ctx := t.Context()

	f.setDown(true)
	w, err := s.Open(ctx, key1) // cannot store chunk 0: retried by the flusher
	require.NoError(t, err)
	_, err = io.WriteString(w, "kept while down\n")
	require.NoError(t, err)
	_, err = io.WriteString(w, strings.Repeat("x", 64)+"\n") // over MaxBuffered: dropped
	require.NoError(t, err)
	require.ErrorIs(t, w.Flush(ctx), objstore.ErrUnavailable)

	f.setDown(false)
	_, err = io.WriteString(w, "after\n")
	require.NoError(t, err)
	require.NoError(t, w.Close(ctx, Trailer{}))
	got, err := s.Read(ctx, key1, 0)
	require.NoError(t, err)
	require.Equal(t, "kept while down\n\n[agentflow: 65 bytes of this log were dropped: the log store was unreachable]\nafter\n", string(got))
}

func TestCloseFailsWhileStoreIsDown(t *testing.T) {
	f := newFlaky()
	s := New(f, slowFlush)
	w, err := s.Open(t.Context(), key1)
	require.NoError(t, err)
	_, err = io.WriteString(w, "line\n")
	require.NoError(t, err)
	f.setDown(true)
	err = w.Close(t.Context(), Trailer{})
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	f.setDown(false)
	entries, err := s.List(t.Context(), key1.AgentID)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.False(t, entries[0].Finished, "no end marker after a failed close")
}

// TestReaderDistrustsTheStore: whoever else writes the store cannot make a
// reader take unbounded data, names outside the layout, or a forged end.
func TestReaderDistrustsTheStore(t *testing.T) {
	ctx := t.Context()
	nonce := strings.Repeat("a", nonceLen)
	other := strings.Repeat("b", nonceLen)
	p := key1.prefix() + "/"
	endJSON := func(m endMarker) string {
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return string(b)
	}
	good := endMarker{Version: endVersion, Writer: nonce, Chunks: 2, Bytes: 6}
	tests := []struct {
		name     string
		objects  map[string]string
		want     string
		finished bool
	}{
		{name: "malformed names ignored", objects: map[string]string{
			p + chunkName(0, nonce): "ok\n", p + "000001.chunk": "bad\n", p + "1." + nonce + ".chunk": "bad\n",
			p + "000002." + strings.ToUpper(nonce) + ".chunk": "bad\n", p + "notes.txt": "bad\n",
			p + "999999." + nonce + ".chunk": "bad\n",
		}, want: "ok\n"},
		{name: "oversized chunk replaced by a note", objects: map[string]string{
			p + chunkName(0, nonce): "a\n", p + chunkName(1, nonce): strings.Repeat("x", MaxChunkBytes+1),
		}, want: "a\n\n[agentflow: log chunk 1 is over 1048576 bytes; not shown]\n"},
		{name: "valid end", objects: map[string]string{
			p + chunkName(0, nonce): "one\n", p + chunkName(1, nonce): "two\n", p + endName: endJSON(good),
		}, want: "one\ntwo\n", finished: true},
		{name: "malformed end noted", objects: map[string]string{
			p + chunkName(0, nonce): "one\n", p + endName: `{"version":1,"writer":"x","chunks":-1}`,
		}, want: "one\n\n[agentflow: end marker writer \"x\" is not a writer nonce]\n", finished: true},
		{name: "end with unknown fields noted", objects: map[string]string{
			p + chunkName(0, nonce): "one\n", p + endName: `{"version":1,"writer":"` + nonce + `","chunks":1,"evil":true}`,
		}, want: "one\n\n[agentflow: decode end marker: json: unknown field \"evil\"]\n", finished: true},
		{name: "end of a writer without chunk 0 ignored", objects: map[string]string{
			p + chunkName(0, nonce): "live\n", p + chunkName(3, other): "stale\n",
			p + endName: endJSON(endMarker{Version: endVersion, Writer: other, Chunks: 4}),
		}, want: "[agentflow: 1 chunk(s) of another delivery of this attempt ignored]\nlive\n"},
		{name: "legacy whole log", objects: map[string]string{
			key1.legacyKey(): "from an earlier version\n",
		}, want: "from an earlier version\n", finished: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := objstore.NewMem()
			for k, v := range tc.objects {
				put(t, mem, k, v)
			}
			s := New(mem, slowFlush)
			got, err := s.Read(ctx, key1, 0)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))

			if tc.finished {
				var out bytes.Buffer
				require.NoError(t, s.Follow(ctx, key1, &out, FollowOptions{Poll: time.Millisecond}))
				require.Equal(t, tc.want, out.String())
			}
			entries, err := s.List(ctx, key1.AgentID)
			require.NoError(t, err)
			require.Len(t, entries, 1)
			require.Equal(t, key1, entries[0].Key)
		})
	}
}

func TestFollowNotesMissingChunks(t *testing.T) {
	mem := objstore.NewMem()
	nonce := strings.Repeat("c", nonceLen)
	p := key1.prefix() + "/"
	put(t, mem, p+chunkName(0, nonce), "zero\n")
	put(t, mem, p+chunkName(2, nonce), "two\n")
	b, err := json.Marshal(endMarker{Version: endVersion, Writer: nonce, Chunks: 3, Bytes: 9})
	require.NoError(t, err)
	put(t, mem, p+endName, string(b))
	var out bytes.Buffer
	require.NoError(t, New(mem, slowFlush).Follow(t.Context(), key1, &out, FollowOptions{Poll: time.Millisecond}))
	require.Equal(t, "zero\n\n[agentflow: chunks 1–2 of this log are missing from the store]\n", out.String())
}

func TestRejectsBadKeys(t *testing.T) {
	s := New(objstore.NewMem(), slowFlush)
	for _, k := range []Key{
		{RunID: "r", StepID: "s", Attempt: 1},
		{AgentID: "a", StepID: "s", Attempt: 1},
		{AgentID: "a", RunID: "r", Attempt: 1},
		{AgentID: "a", RunID: "r", StepID: "s"},
		{AgentID: strings.Repeat("/", 200), RunID: "r", StepID: "s", Attempt: 1}, // escapes past the key limit
	} {
		_, err := s.Open(t.Context(), k)
		require.Error(t, err, k.String())
		_, err = s.Read(t.Context(), k, 0)
		require.Error(t, err, k.String())
	}
}

func TestEscapeKeepsHostileIDsInside(t *testing.T) {
	mem := objstore.NewMem()
	s := New(objstore.Sub(mem, "logs"), slowFlush)
	hostile := []string{"..", ".", "../../etc", "a/b", "%", "%2E", ".hidden", "ok.name", "with space", "", "a=b"}
	for i, id := range hostile {
		k := Key{AgentID: "agent" + id, RunID: id, StepID: "s", Attempt: int32(i + 1)}
		if id == "" {
			k.RunID = "%" // the empty ID escapes to "%": distinct from "%" itself
		}
		w, err := s.Open(t.Context(), k)
		require.NoError(t, err, id)
		_, err = io.WriteString(w, id)
		require.NoError(t, err)
		require.NoError(t, w.Close(t.Context(), Trailer{}))

		entries, err := s.List(t.Context(), k.AgentID)
		require.NoError(t, err)
		require.Len(t, entries, 1, id)
		require.Equal(t, k, entries[0].Key)
	}
	// Everything is under the prefix (the key rule refuses anything else).
	infos, err := mem.List(t.Context(), "")
	require.NoError(t, err)
	for _, i := range infos {
		require.True(t, strings.HasPrefix(i.Key, "logs/"), i.Key)
	}
	require.Equal(t, "%", escape(""))
	require.NotEqual(t, escape(""), escape("%"))
}

// clocked stamps objects with a counter instead of the wall clock, so
// List's order is the order of the Puts.
type clocked struct {
	*objstore.Mem
	mu   sync.Mutex
	tick int
	at   map[string]time.Time
}

func (c *clocked) Put(ctx context.Context, key string, r io.Reader, o objstore.PutOptions) (objstore.Info, error) {
	c.mu.Lock()
	c.tick++
	c.at[key] = time.Unix(int64(c.tick), 0)
	c.mu.Unlock()
	return c.Mem.Put(ctx, key, r, o)
}

func (c *clocked) List(ctx context.Context, prefix string) ([]objstore.Info, error) {
	infos, err := c.Mem.List(ctx, prefix)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range infos {
		infos[i].ModTime = c.at[infos[i].Key]
	}
	return infos, err
}

func TestListAndFind(t *testing.T) {
	mem := &clocked{Mem: objstore.NewMem(), at: map[string]time.Time{}}
	s := New(mem, slowFlush)
	ctx := t.Context()
	entries, err := s.List(ctx, "nobody")
	require.NoError(t, err)
	require.Empty(t, entries)

	// Written in this order: List sorts by the latest object's time.
	for _, k := range []struct {
		run, step string
		attempt   int32
	}{{"old", "a", 1}, {"old", "a", 2}, {"old", "b", 1}, {"new", "a", 1}, {"new", "a", 2}} {
		w, err := s.Open(ctx, Key{AgentID: "ag", RunID: k.run, StepID: k.step, Attempt: k.attempt})
		require.NoError(t, err)
		require.NoError(t, w.Close(ctx, Trailer{Text: []byte("x")}))
	}
	put(t, mem, "ag/old/c/1.log", "legacy") // an earlier version's log is listed too
	put(t, mem, "ag/old/c/x.log", "bad")    // not an attempt number: ignored
	put(t, mem, "ag/old/c/01/end", "bad")   // neither

	entries, err = s.List(ctx, "ag")
	require.NoError(t, err)
	require.Len(t, entries, 6)

	keys := func(es []Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Key.String())
		}
		return out
	}
	tests := []struct {
		name    string
		runID   string
		step    string
		attempt int32
		want    []string
	}{
		{name: "latest run all attempts", step: "a", want: []string{"ag/new/a/1", "ag/new/a/2"}},
		{name: "explicit run", runID: "old", step: "a", want: []string{"ag/old/a/1", "ag/old/a/2"}},
		{name: "one attempt", step: "a", attempt: 2, want: []string{"ag/new/a/2"}},
		{name: "step only in old run", step: "b", want: []string{"ag/old/b/1"}},
		{name: "legacy log", step: "c", want: []string{"ag/old/c/1"}},
		{name: "unknown step", step: "zz", want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, keys(Find(entries, tc.runID, tc.step, tc.attempt)))
		})
	}
	step, err := s.ListStep(ctx, "ag", "old", "a")
	require.NoError(t, err)
	require.Equal(t, []string{"ag/old/a/1", "ag/old/a/2"}, keys(step))
	_, err = s.ListStep(ctx, "ag", "", "a")
	require.Error(t, err)
}

func TestTailLines(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 0, "a\nb\nc\n"},
		{"a\nb\nc\n", 1, "c\n"},
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\nc\n", 10, "a\nb\nc\n"},
		{"", 3, ""},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, string(TailLines([]byte(tc.in), tc.n)), "%q %d", tc.in, tc.n)
	}
}
