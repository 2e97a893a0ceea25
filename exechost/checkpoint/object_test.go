package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/objstore"
)

// storeFactory returns a fresh, empty object store for one test.
type storeFactory func(t *testing.T) objstore.Store

// runObjectTests is the checkpoint-store contract, run against every
// objstore implementation (Mem here, Dir below, MinIO in the integration
// test).
func runObjectTests(t *testing.T, newStore storeFactory) {
	tests := []struct {
		name string
		run  func(t *testing.T, raw objstore.Store, s *Object)
	}{
		{"round trip", testObjectRoundTrip},
		{"tampered content", testObjectTamperedContent},
		{"failed put leaves nothing", testObjectFailedPutLeavesNothing},
		{"content missing", testObjectContentMissing},
		{"bad manifests", testObjectBadManifests},
		{"one writer commits", testObjectOneWriterCommits},
		{"sealed over object", testObjectSealed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := newStore(t)
			tt.run(t, raw, NewObject(raw))
		})
	}
}

func TestObjectOverMem(t *testing.T) {
	runObjectTests(t, func(*testing.T) objstore.Store { return objstore.NewMem() })
}

func testObjectRoundTrip(t *testing.T, raw objstore.Store, s *Object) {
	ctx := t.Context()
	m := validManifest()
	m.SizeBytes, m.SHA256 = 0, ""
	got, err := s.Put(ctx, m, strings.NewReader("hello"), nil)
	require.NoError(t, err)
	require.EqualValues(t, 5, got.SizeBytes)
	require.Equal(t, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", got.SHA256)

	infos, err := raw.List(ctx, "")
	require.NoError(t, err)
	var keys []string
	for _, i := range infos {
		keys = append(keys, i.Key)
	}
	require.Equal(t, []string{"ckpt-1.json", "ckpt-1.tar"}, keys, "the layout every worker reads")

	st, err := s.Stat(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, got, st)
	gm, rc, err := s.Get(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, got, gm)
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.Equal(t, "hello", string(b))

	_, err = s.Put(ctx, m, strings.NewReader("again"), nil)
	require.ErrorIs(t, err, ErrExists)

	require.NoError(t, s.Delete(ctx, m.ID))
	require.NoError(t, s.Delete(ctx, m.ID), "delete is idempotent")
	_, err = s.Stat(ctx, m.ID)
	require.ErrorIs(t, err, exechost.ErrNotFound)
	_, _, err = s.Get(ctx, "missing")
	require.ErrorIs(t, err, exechost.ErrNotFound)
	for _, id := range []exechost.CheckpointID{"../escape", "a/b", ".hidden"} {
		_, err = s.Stat(ctx, id)
		require.ErrorIs(t, err, exechost.ErrPolicy, "id %q", id)
		_, err = s.Put(ctx, Manifest{ID: id}, strings.NewReader(""), nil)
		require.ErrorIs(t, err, exechost.ErrPolicy, "id %q", id)
	}
}

func testObjectTamperedContent(t *testing.T, raw objstore.Store, s *Object) {
	ctx := t.Context()
	m, err := s.Put(ctx, validManifest(), strings.NewReader("hello"), nil)
	require.NoError(t, err)
	for name, content := range map[string]string{"same size": "jello", "longer": "hello!", "shorter": "hell", "empty": ""} {
		t.Run(name, func(t *testing.T) {
			_, err := raw.Put(ctx, "ckpt-1.tar", strings.NewReader(content), objstore.PutOptions{})
			require.NoError(t, err)
			_, rc, err := s.Get(ctx, m.ID)
			require.NoError(t, err)
			defer rc.Close()
			_, err = io.ReadAll(rc)
			require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)
		})
	}
}

func testObjectFailedPutLeavesNothing(t *testing.T, raw objstore.Store, s *Object) {
	_, err := s.Put(t.Context(), validManifest(), io.MultiReader(bytes.NewReader([]byte("partial")), failingReader{}), nil)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the content's failure is reported, not the store's")
	require.NotErrorIs(t, err, exechost.ErrStoreUnavailable)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = s.Put(ctx, validManifest(), strings.NewReader("x"), nil)
	require.ErrorIs(t, err, context.Canceled)

	_, err = s.Put(t.Context(), validManifest(), strings.NewReader("x"), func(Manifest) (Manifest, error) {
		return Manifest{}, errors.New("no key")
	})
	require.ErrorContains(t, err, "no key")
	require.ErrorContains(t, err, "put checkpoint ckpt-1:", "the message names the checkpoint")

	infos, err := raw.List(t.Context(), "")
	require.NoError(t, err)
	require.Empty(t, infos)
	_, err = s.Stat(t.Context(), "ckpt-1")
	require.ErrorIs(t, err, exechost.ErrNotFound)

	// An orphaned content object (a writer killed before its manifest) is
	// invisible and does not block the ID.
	_, err = raw.Put(t.Context(), "ckpt-1.tar", strings.NewReader("orphan"), objstore.PutOptions{})
	require.NoError(t, err)
	_, err = s.Stat(t.Context(), "ckpt-1")
	require.ErrorIs(t, err, exechost.ErrNotFound)
	_, err = s.Put(t.Context(), validManifest(), strings.NewReader("fresh"), nil)
	require.NoError(t, err)
	_, rc, err := s.Get(t.Context(), "ckpt-1")
	require.NoError(t, err)
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	rc.Close()
	require.Equal(t, "fresh", string(b))
}

func testObjectContentMissing(t *testing.T, raw objstore.Store, s *Object) {
	ctx := t.Context()
	_, err := s.Put(ctx, validManifest(), strings.NewReader("hello"), nil)
	require.NoError(t, err)
	require.NoError(t, raw.Delete(ctx, "ckpt-1.tar"))
	_, _, err = s.Get(ctx, "ckpt-1")
	require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)
	require.ErrorContains(t, err, "content missing")
}

func testObjectBadManifests(t *testing.T, raw objstore.Store, s *Object) {
	ctx := t.Context()
	other := validManifest()
	other.ID = "ckpt-2"
	otherJSON, err := EncodeManifest(other)
	require.NoError(t, err)
	for name, body := range map[string]string{
		"garbage":       "tar",
		"huge":          strings.Repeat(" ", maxManifestBytes+1),
		"names another": string(otherJSON),
		"empty":         "",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := raw.Put(ctx, "ckpt-1.json", strings.NewReader(body), objstore.PutOptions{})
			require.NoError(t, err)
			_, err = raw.Put(ctx, "ckpt-1.tar", strings.NewReader("hello"), objstore.PutOptions{})
			require.NoError(t, err)
			_, err = s.Stat(ctx, "ckpt-1")
			require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)
			_, _, err = s.Get(ctx, "ckpt-1")
			require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)
		})
	}
}

func testObjectOneWriterCommits(t *testing.T, raw objstore.Store, s *Object) {
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Put(t.Context(), validManifest(), strings.NewReader(fmt.Sprintf("writer %d", i)), nil)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		require.ErrorIs(t, err, ErrExists)
	}
	require.Equal(t, 1, won, "exactly one writer commits: %v", errs)
	// Whatever the others did to the content, what is served is either the
	// winner's exact bytes or refused.
	_, rc, err := s.Get(t.Context(), "ckpt-1")
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)
		return
	}
	require.Contains(t, string(b), "writer ")
}

func testObjectSealed(t *testing.T, raw objstore.Store, s *Object) {
	ctx := t.Context()
	sealed, err := NewSealed(s, testKeyring(t, "k1"), SealedOptions{})
	require.NoError(t, err)
	m, err := sealed.Put(ctx, validManifest(), strings.NewReader("hello"), nil)
	require.NoError(t, err)
	require.NotEmpty(t, m.MAC)
	_, err = sealed.Stat(ctx, m.ID)
	require.NoError(t, err)

	// A bucket writer who re-signs nothing but edits the manifest is refused.
	rc, err := raw.Get(ctx, "ckpt-1.json")
	require.NoError(t, err)
	orig, err := io.ReadAll(rc)
	require.NoError(t, err)
	rc.Close()
	edited := strings.Replace(string(orig), `"exec-1"`, `"exec-2"`, 1)
	require.NotEqual(t, string(orig), edited)
	_, err = raw.Put(ctx, "ckpt-1.json", strings.NewReader(edited), objstore.PutOptions{})
	require.NoError(t, err)
	_, err = sealed.Stat(ctx, m.ID)
	require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint)
}

// fullStore accepts limit bytes per Put and then fails the way a Dir on a
// full disk does: an *objstore.UnavailableError with one short reason.
type fullStore struct {
	objstore.Store
	limit int64
}

func (f fullStore) Put(ctx context.Context, key string, r io.Reader, opts objstore.PutOptions) (objstore.Info, error) {
	data, err := io.ReadAll(io.LimitReader(r, f.limit+1))
	if err != nil {
		return objstore.Info{}, err
	}
	if int64(len(data)) > f.limit {
		return objstore.Info{}, &objstore.UnavailableError{Store: f.String(), Op: "put", Key: key,
			Reason: "no space left on device", Err: syscall.ENOSPC}
	}
	return f.Store.Put(ctx, key, bytes.NewReader(data), opts)
}

// midReadFailure serves the first n bytes of every object and then fails as
// a store that went away mid-download.
type midReadFailure struct {
	objstore.Store
	n int64
}

func (m midReadFailure) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := m.Store.Get(ctx, key)
	if err != nil || !strings.HasSuffix(key, ".tar") {
		return rc, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(rc, m.n), errReader{&objstore.UnavailableError{
		Store: m.String(), Op: "get", Key: key, Reason: "connection reset by peer"}}), rc}, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// TestObjectStoreUnavailable: every way the store can fail is one typed
// error (exechost.ErrStoreUnavailable, so the attempt is an infrastructure
// failure) with one message naming the store, not a chain of repeats.
func TestObjectStoreUnavailable(t *testing.T) {
	ctx := t.Context()
	down := objstore.NewMem()
	down.Fail = errors.New("connection refused")

	partial := objstore.NewMem()
	_, err := NewObject(partial).Put(ctx, validManifest(), strings.NewReader(strings.Repeat("x", 100)), nil)
	require.NoError(t, err)

	tests := []struct {
		name   string
		op     func(s *Object) error
		store  objstore.Store
		reason string
	}{
		{name: "disk full", store: fullStore{Store: objstore.NewMem(), limit: 10}, reason: "no space left on device",
			op: func(s *Object) error {
				_, err := s.Put(ctx, validManifest(), strings.NewReader(strings.Repeat("x", 100)), nil)
				return err
			}},
		{name: "down at put", store: down, reason: "connection refused", op: func(s *Object) error {
			_, err := s.Put(ctx, validManifest(), strings.NewReader("x"), nil)
			return err
		}},
		{name: "down at stat", store: down, reason: "connection refused", op: func(s *Object) error {
			_, err := s.Stat(ctx, "ckpt-1")
			return err
		}},
		{name: "down at get", store: down, reason: "connection refused", op: func(s *Object) error {
			_, _, err := s.Get(ctx, "ckpt-1")
			return err
		}},
		{name: "down at delete", store: down, reason: "connection refused", op: func(s *Object) error {
			return s.Delete(ctx, "ckpt-1")
		}},
		{name: "gone mid-read", store: midReadFailure{Store: partial, n: 10}, reason: "connection reset by peer",
			op: func(s *Object) error {
				_, rc, err := s.Get(ctx, "ckpt-1")
				if err != nil {
					return err
				}
				defer rc.Close()
				_, err = io.ReadAll(rc)
				return err
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewObject(tt.store)
			err := tt.op(s)
			require.ErrorIs(t, err, exechost.ErrStoreUnavailable)
			require.NotErrorIs(t, err, exechost.ErrCorruptCheckpoint)
			var ue *UnavailableError
			require.ErrorAs(t, err, &ue)
			require.Equal(t, "mem", ue.Store)
			msg := err.Error()
			require.Contains(t, msg, "checkpoint store mem unavailable: ")
			require.True(t, strings.HasSuffix(msg, tt.reason), msg)
			require.Equal(t, 1, strings.Count(msg, "unavailable"), "one message, no repeats: %s", msg)
			require.Equal(t, 1, strings.Count(msg, tt.reason), msg)
		})
	}

	// After a full disk nothing is visible and the content is cleaned up.
	mem := objstore.NewMem()
	_, err = NewObject(fullStore{Store: mem, limit: 10}).Put(ctx, validManifest(), strings.NewReader(strings.Repeat("x", 100)), nil)
	require.ErrorIs(t, err, exechost.ErrStoreUnavailable)
	infos, err := mem.List(ctx, "")
	require.NoError(t, err)
	require.Empty(t, infos)
}

func TestObjectOverDir(t *testing.T) {
	runObjectTests(t, func(t *testing.T) objstore.Store {
		d, err := objstore.NewDir(t.TempDir())
		require.NoError(t, err)
		t.Cleanup(func() { _ = d.Close() })
		return d
	})
}
