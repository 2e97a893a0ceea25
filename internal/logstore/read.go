package logstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/objstore"
)

// chunk is one stored chunk of the current writer.
type chunk struct {
	seq  int
	key  string
	size int64
}

// view is what the store holds for one attempt, as a reader takes it.
type view struct {
	writer  string  // the current writer's nonce ("" = no chunks)
	chunks  []chunk // the current writer's chunks, by seq (gaps possible)
	ignored int     // chunks of other writers (superseded deliveries)
	end     *endMarker
	endErr  error // an end marker exists but is unusable
	legacy  *objstore.Info
	modTime time.Time
}

func (v *view) exists() bool {
	return v.writer != "" || v.legacy != nil || v.end != nil || v.endErr != nil
}

// finished: the attempt's log is complete (an end marker of the current
// writer, an unusable end marker, or an earlier version's whole log).
func (v *view) finished() bool {
	return v.endErr != nil || v.end != nil || v.legacy != nil && v.writer == ""
}

// scan lists one attempt and picks its current writer: the end marker's
// writer when that still has its chunk 0, else the writer whose chunk 0 is
// newest (the latest Open; see the package comment).
func (s *Store) scan(ctx context.Context, key Key) (*view, error) {
	if err := key.validate(); err != nil {
		return nil, err
	}
	prefix := key.prefix() + "/"
	infos, err := s.s.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list log %s in %s: %w", key, s.s, err)
	}
	if len(infos) > maxAttemptObjects {
		// Not what any writer makes: someone else filled the prefix.
		return nil, fmt.Errorf("log %s in %s: %d objects under its prefix (at most %d)", key, s.s, len(infos), maxAttemptObjects)
	}
	v := &view{}
	groups := map[string][]chunk{}
	zero := map[string]time.Time{}
	hasEnd := false
	for _, info := range infos {
		name := strings.TrimPrefix(info.Key, prefix)
		if info.ModTime.After(v.modTime) {
			v.modTime = info.ModTime
		}
		if name == endName {
			hasEnd = true
			continue
		}
		seq, nonce, ok := parseChunkName(name)
		if !ok {
			continue // not ours: ignored
		}
		groups[nonce] = append(groups[nonce], chunk{seq: seq, key: info.Key, size: info.Size})
		if seq == 0 {
			zero[nonce] = info.ModTime
		}
	}
	if hasEnd {
		m, err := s.readEnd(ctx, prefix+endName)
		switch {
		case errors.Is(err, objstore.ErrNotFound):
			// Deleted since the listing (a new delivery opened): no end.
		case err != nil && errors.Is(err, objstore.ErrUnavailable):
			return nil, fmt.Errorf("read end marker of log %s: %w", key, err)
		case err != nil:
			v.endErr = err
		default:
			if _, ok := zero[m.Writer]; ok {
				v.end = &m
				v.writer = m.Writer
			}
			// An end marker of a writer without chunk 0 is a superseded
			// delivery's: ignored.
		}
	}
	if v.writer == "" {
		for nonce, t := range zero {
			if v.writer == "" || t.After(zero[v.writer]) || t.Equal(zero[v.writer]) && nonce > v.writer {
				v.writer = nonce
			}
		}
	}
	for nonce, cs := range groups {
		if nonce == v.writer {
			slices.SortFunc(cs, func(a, b chunk) int { return a.seq - b.seq })
			v.chunks = cs
			continue
		}
		v.ignored += len(cs)
	}
	if v.writer == "" && v.endErr == nil {
		info, err := s.s.Stat(ctx, key.legacyKey())
		switch {
		case err == nil:
			v.legacy = &info
			if info.ModTime.After(v.modTime) {
				v.modTime = info.ModTime
			}
		case !errors.Is(err, objstore.ErrNotFound):
			return nil, fmt.Errorf("stat log %s in %s: %w", key, s.s, err)
		}
	}
	return v, nil
}

func (s *Store) readEnd(ctx context.Context, key string) (endMarker, error) {
	r, err := s.s.Get(ctx, key)
	if err != nil {
		return endMarker{}, err
	}
	defer r.Close()
	return decodeEnd(r)
}

// readChunk returns a chunk's bytes, or a note in their place when the
// stored object is over MaxChunkBytes (nothing a Writer makes). A chunk
// deleted since the listing reads as empty.
func (s *Store) readChunk(ctx context.Context, c chunk) ([]byte, error) {
	r, err := s.s.Get(ctx, c.key)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read log chunk %s: %w", c.key, err)
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, MaxChunkBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read log chunk %s: %w", c.key, err)
	}
	if len(data) > MaxChunkBytes {
		return fmt.Appendf(nil, "\n[agentflow: log chunk %d is over %d bytes; not shown]\n", c.seq, MaxChunkBytes), nil
	}
	return data, nil
}

func ignoredNote(n int) []byte {
	return fmt.Appendf(nil, "[agentflow: %d chunk(s) of another delivery of this attempt ignored]\n", n)
}

// Read returns the attempt's log as stored so far, or only its last tail
// bytes when tail > 0, at most MaxReadBytes either way (the last ones). A
// key with nothing stored is ErrNotFound.
func (s *Store) Read(ctx context.Context, key Key, tail int64) ([]byte, error) {
	v, err := s.scan(ctx, key)
	if err != nil {
		return nil, err
	}
	if !v.exists() {
		return nil, fmt.Errorf("%w: %s in %s", ErrNotFound, key, s.s)
	}
	limit := int64(MaxReadBytes)
	if tail > 0 && tail < limit {
		limit = tail
	}
	if v.writer == "" && v.legacy != nil {
		return s.readLegacy(ctx, key, limit)
	}
	// Walk back from the last chunk until limit bytes are taken: a tail
	// read of a long log costs its last chunks only.
	var parts [][]byte
	var n int64
	for i := len(v.chunks) - 1; i >= 0 && n < limit; i-- {
		data, err := s.readChunk(ctx, v.chunks[i])
		if err != nil {
			return nil, err
		}
		parts = append(parts, data)
		n += int64(len(data))
	}
	var out bytes.Buffer
	if v.ignored > 0 && tail <= 0 {
		out.Write(ignoredNote(v.ignored))
	}
	for i := len(parts) - 1; i >= 0; i-- {
		out.Write(parts[i])
	}
	data := out.Bytes()
	if int64(len(data)) > limit {
		data = data[int64(len(data))-limit:]
	}
	if v.endErr != nil && tail <= 0 {
		data = append(data, fmt.Appendf(nil, "\n[agentflow: %v]\n", v.endErr)...)
	}
	return data, nil
}

func (s *Store) readLegacy(ctx context.Context, key Key, limit int64) ([]byte, error) {
	r, err := s.s.Get(ctx, key.legacyKey())
	if err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return nil, fmt.Errorf("%w: %s in %s", ErrNotFound, key, s.s)
		}
		return nil, fmt.Errorf("read log %s: %w", key, err)
	}
	defer r.Close()
	// No ranged reads in objstore: keep a sliding window of limit bytes.
	var buf []byte
	chunk := make([]byte, 64<<10)
	for {
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if int64(len(buf)) > 2*limit {
			buf = append([]byte(nil), buf[int64(len(buf))-limit:]...)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read log %s: %w", key, err)
		}
	}
	if int64(len(buf)) > limit {
		buf = buf[int64(len(buf))-limit:]
	}
	return buf, nil
}

// List returns every attempt log of an agent, oldest first (by the time
// of each attempt's latest object). An agent without logs yields an empty
// list. It reads no chunk: Finished means an end marker exists (Read and
// Follow check it).
func (s *Store) List(ctx context.Context, agentID string) ([]Entry, error) {
	return s.list(ctx, agentID, "")
}

// ListStep is List for the attempts of one step of one run: it lists only
// their prefix (what `agentctl logs -f` polls).
func (s *Store) ListStep(ctx context.Context, agentID, runID, stepID string) ([]Entry, error) {
	if runID == "" || stepID == "" {
		return nil, fmt.Errorf("list logs of %s: run and step are required", agentID)
	}
	return s.list(ctx, agentID, escape(runID)+"/"+escape(stepID)+"/")
}

func (s *Store) list(ctx context.Context, agentID, sub string) ([]Entry, error) {
	if agentID == "" {
		return nil, fmt.Errorf("list logs: agent ID is required")
	}
	agent := escape(agentID) + "/"
	infos, err := s.s.List(ctx, agent+sub)
	if err != nil {
		return nil, fmt.Errorf("list logs of %s in %s: %w", agentID, s.s, err)
	}
	type acc struct {
		Entry
		sizes map[string]int64 // per writer
		zero  map[string]time.Time
	}
	byKey := map[Key]*acc{}
	get := func(k Key) *acc {
		a, ok := byKey[k]
		if !ok {
			a = &acc{Entry: Entry{Key: k}, sizes: map[string]int64{}, zero: map[string]time.Time{}}
			byKey[k] = a
		}
		return a
	}
	for _, info := range infos {
		parts := strings.Split(strings.TrimPrefix(info.Key, agent), "/")
		var a *acc
		switch len(parts) {
		case 3: // <run>/<step>/<attempt>.log, an earlier version's
			n, ok := parseAttempt(strings.TrimSuffix(parts[2], ".log"))
			if !ok || !strings.HasSuffix(parts[2], ".log") {
				continue
			}
			a = get(Key{AgentID: agentID, RunID: unescape(parts[0]), StepID: unescape(parts[1]), Attempt: n})
			if len(a.sizes) == 0 {
				a.Size, a.Finished = info.Size, true
			}
		case 4: // <run>/<step>/<attempt>/<chunk or end>
			n, ok := parseAttempt(parts[2])
			if !ok {
				continue
			}
			k := Key{AgentID: agentID, RunID: unescape(parts[0]), StepID: unescape(parts[1]), Attempt: n}
			if parts[3] == endName {
				a = get(k)
				a.Finished = true
				break
			}
			seq, nonce, ok := parseChunkName(parts[3])
			if !ok {
				continue
			}
			a = get(k)
			if len(a.sizes) == 0 {
				a.Size, a.Finished = 0, false // chunks supersede an earlier version's log
			}
			a.sizes[nonce] += info.Size
			if seq == 0 {
				a.zero[nonce] = info.ModTime
			}
		default:
			continue
		}
		if info.ModTime.After(a.ModTime) {
			a.ModTime = info.ModTime
		}
	}
	out := make([]Entry, 0, len(byKey))
	for _, a := range byKey {
		if len(a.sizes) > 0 {
			var cur string
			for nonce, t := range a.zero {
				if cur == "" || t.After(a.zero[cur]) || t.Equal(a.zero[cur]) && nonce > cur {
					cur = nonce
				}
			}
			a.Size = a.sizes[cur]
		}
		out = append(out, a.Entry)
	}
	slices.SortStableFunc(out, func(a, b Entry) int {
		if c := a.ModTime.Compare(b.ModTime); c != 0 {
			return c
		}
		return strings.Compare(a.Key.String(), b.Key.String())
	})
	return out, nil
}

func parseAttempt(s string) (int32, bool) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 1 || strconv.FormatInt(n, 10) != s {
		return 0, false
	}
	return int32(n), true
}

func sortByAttempt(es []Entry) {
	slices.SortStableFunc(es, func(a, b Entry) int { return int(a.Key.Attempt) - int(b.Key.Attempt) })
}
