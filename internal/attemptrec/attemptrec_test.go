package attemptrec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/internal/objstore"
)

func keyring(t *testing.T, id string) *checkpoint.Keyring {
	t.Helper()
	k, err := checkpoint.NewKeyring(checkpoint.Key{ID: id, Secret: bytes.Repeat([]byte(id[:1]), checkpoint.MinKeyBytes)})
	require.NoError(t, err)
	return k
}

func record(step string, attempt int32) Record {
	return Record{
		AgentID: "agent/1", RunID: "run-1", StepID: step, Attempt: attempt,
		Image: "sha256:" + strings.Repeat("a", 64), ImageDigest: "sha256:" + strings.Repeat("a", 64),
		CheckpointID: "cp-1", Output: json.RawMessage(`{"ok":true}`), OutputBytes: 11, Worker: "1@host",
		FinishedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

func get(t *testing.T, m objstore.Store, key string) []byte {
	t.Helper()
	rc, err := m.Get(t.Context(), key)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return b
}

func put(t *testing.T, m objstore.Store, key string, b []byte) {
	t.Helper()
	_, err := m.Put(t.Context(), key, bytes.NewReader(b), objstore.PutOptions{})
	require.NoError(t, err)
}

func TestRoundTripAndWriteOnce(t *testing.T) {
	ctx := t.Context()
	mem := objstore.NewMem()
	s, err := New(mem, keyring(t, "k1"), 0)
	require.NoError(t, err)
	require.NoError(t, s.Put(ctx, record("fetch", 2)))
	require.NoError(t, s.Put(ctx, record("fetch", 1)))
	require.NoError(t, s.Put(ctx, record("other", 1)))
	require.ErrorIs(t, s.Put(ctx, record("fetch", 2)), objstore.ErrExists, "an attempt is recorded once")

	infos, err := mem.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, infos, 3)
	require.Equal(t, "agent%2F1/run-1/fetch/1.json", infos[0].Key, "segments are escaped")

	entries, err := s.List(ctx, "agent/1", "run-1", "fetch", 1)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only attempts up to maxAttempt")
	entries, err = s.List(ctx, "agent/1", "run-1", "fetch", 9)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	for i, e := range entries {
		require.NoError(t, e.Err)
		want := record("fetch", int32(i+1))
		want.Schema = SchemaVersion
		require.Equal(t, &want, e.Record)
		require.Equal(t, int32(i+1), e.Attempt)
	}
}

func TestUntrustedRecordsAreRejected(t *testing.T) {
	key := Key("agent/1", "run-1", "fetch", 2)
	tests := []struct {
		name string
		// plant writes into the store what a bucket writer (or an honest
		// worker under another key) left there.
		plant func(t *testing.T, mem objstore.Store, mine, foreign *Store)
		why   string
	}{
		{name: "forged with another key", plant: func(t *testing.T, _ objstore.Store, _, foreign *Store) {
			require.NoError(t, foreign.Put(t.Context(), record("fetch", 2)))
		}, why: "unknown key"},
		{name: "edited output", plant: func(t *testing.T, mem objstore.Store, mine, _ *Store) {
			require.NoError(t, mine.Put(t.Context(), record("fetch", 2)))
			orig := get(t, mem, key)
			b := bytes.Replace(orig, []byte(`{"ok":true}`), []byte(`{"ok":false}`), 1)
			require.NotEqual(t, orig, b)
			require.NoError(t, mem.Delete(t.Context(), key))
			put(t, mem, key, b)
		}, why: "mac does not match"},
		{name: "real record of another step moved here", plant: func(t *testing.T, mem objstore.Store, mine, _ *Store) {
			require.NoError(t, mine.Put(t.Context(), record("build", 2)))
			put(t, mem, key, get(t, mem, Key("agent/1", "run-1", "build", 2)))
		}, why: `step "build"`},
		{name: "real record of another attempt moved here", plant: func(t *testing.T, mem objstore.Store, mine, _ *Store) {
			require.NoError(t, mine.Put(t.Context(), record("fetch", 1)))
			put(t, mem, key, get(t, mem, Key("agent/1", "run-1", "fetch", 1)))
		}, why: "attempt 1"},
		{name: "oversized", plant: func(t *testing.T, mem objstore.Store, _, _ *Store) {
			put(t, mem, key, bytes.Repeat([]byte(" "), 4097))
		}, why: "over the bound"},
		{name: "not json", plant: func(t *testing.T, mem objstore.Store, _, _ *Store) {
			put(t, mem, key, []byte("{"))
		}, why: "not a signed record"},
		{name: "unsigned record", plant: func(t *testing.T, mem objstore.Store, _, _ *Store) {
			b, _ := json.Marshal(record("fetch", 2))
			put(t, mem, key, b)
		}, why: "not a signed record"},
		{name: "signed envelope with extra fields", plant: func(t *testing.T, mem objstore.Store, mine, _ *Store) {
			require.NoError(t, mine.Put(t.Context(), record("fetch", 2)))
			orig := get(t, mem, key)
			b := bytes.Replace(orig, []byte(`{"record"`), []byte(`{"x":1,"record"`), 1)
			require.NotEqual(t, orig, b)
			require.NoError(t, mem.Delete(t.Context(), key))
			put(t, mem, key, b)
		}, why: "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := objstore.NewMem()
			mine, err := New(mem, keyring(t, "mine"), 4096)
			require.NoError(t, err)
			foreign, err := New(mem, keyring(t, "xforeign"), 4096)
			require.NoError(t, err)
			tt.plant(t, mem, mine, foreign)
			entries, err := mine.List(t.Context(), "agent/1", "run-1", "fetch", 2)
			require.NoError(t, err)
			var found *Entry
			for i := range entries {
				if entries[i].Attempt == 2 {
					found = &entries[i]
				}
			}
			require.NotNil(t, found)
			require.Nil(t, found.Record)
			require.ErrorIs(t, found.Err, ErrInvalidRecord)
			require.Contains(t, found.Err.Error(), tt.why)
		})
	}
}

func TestOtherNamesAreSkipped(t *testing.T) {
	mem := objstore.NewMem()
	s, err := New(mem, keyring(t, "k1"), 0)
	require.NoError(t, err)
	prefix := StepPrefix("a", "r", "s")
	for _, name := range []string{"01.json", "0.json", "x.json", "1.txt", "1/2.json", "-1.json"} {
		put(t, mem, prefix+name, []byte("{}"))
	}
	entries, err := s.List(t.Context(), "a", "r", "s", 100)
	require.NoError(t, err)
	require.Empty(t, entries)
}

func TestStoreOutageIsUnavailable(t *testing.T) {
	mem := objstore.NewMem()
	s, err := New(mem, keyring(t, "k1"), 0)
	require.NoError(t, err)
	mem.Fail = errors.New("connection refused")
	err = s.Put(context.Background(), record("fetch", 1))
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	_, err = s.List(context.Background(), "agent/1", "run-1", "fetch", 1)
	require.ErrorIs(t, err, objstore.ErrUnavailable)
}

func TestPutRefusesIncompleteRecords(t *testing.T) {
	s, err := New(objstore.NewMem(), keyring(t, "k1"), 0)
	require.NoError(t, err)
	for _, mut := range []func(*Record){
		func(r *Record) { r.StepID = "" },
		func(r *Record) { r.Attempt = 0 },
		func(r *Record) { r.CheckpointID = "" },
		func(r *Record) { r.Output = nil },
	} {
		r := record("fetch", 1)
		mut(&r)
		require.Error(t, s.Put(t.Context(), r))
	}
}

func TestSegmentIsInjectiveAndKeySafe(t *testing.T) {
	seen := map[string]string{}
	for _, s := range []string{"", "%", ".", "..", "a/b", "a%2Fb", ".hidden", "ü", "a.b", "a b"} {
		seg := Segment(s)
		require.NoError(t, objstore.CheckKey(seg), "%q → %q", s, seg)
		if prev, ok := seen[seg]; ok {
			t.Fatalf("%q and %q both escape to %q", prev, s, seg)
		}
		seen[seg] = s
	}
}
