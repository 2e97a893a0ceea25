package logstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentflow/agentflow/internal/objstore"
)

// Writer streams one attempt's log into the store. Write only buffers (it
// never waits for the store); a goroutine stores the buffer as a chunk
// every FlushInterval, or sooner once ChunkBytes are buffered; Close
// stores the rest and the end marker. A store problem never fails Write:
// chunks that could not be stored are kept (up to MaxBuffered, beyond that
// new bytes are dropped with a note) and retried at the next flush, and
// the problem is logged. Chunks and the end marker are stored with
// objstore's NoSync: a crash of the machine may cost a log its tail (the
// reader takes objects missing, empty or cut short), and a step no longer
// waits for the disk at its log's open and close (DECISIONS 249). Safe
// for concurrent use.
type Writer struct {
	s      *Store
	key    Key
	prefix string
	nonce  string
	log    *slog.Logger

	mu      sync.Mutex
	buf     []byte   // written, not yet cut into a chunk
	pending [][]byte // cut, not yet stored; pending[0] is chunk next
	held    int      // len(buf) + bytes in pending
	next    int      // seq of pending[0]
	stored  int64    // bytes in stored chunks
	dropped int64    // bytes dropped since the last note
	closed  bool

	// Only the flusher goroutine (and Close, once it has ended) touch these.
	started bool // stale objects deleted, chunk 0 stored
	failing bool // the last flush failed (log once per outage)
	full    bool // MaxChunks stored

	kick   chan struct{}   // buffered(1): ChunkBytes reached
	flushq chan chan error // Flush's requests, served by the flusher
	stop   chan struct{}
	done   chan struct{}
}

// Trailer is what Close appends and records.
type Trailer struct {
	// Text is appended to the log as its last chunk (stdout of a failed
	// attempt, the failure line).
	Text []byte
	// Outcome is recorded in the end marker ("success", "failed: …",
	// "canceled"); cut to 1 KiB.
	Outcome string
}

// Open starts the log of key: it deletes what an earlier delivery of the
// same attempt stored and stores an empty chunk 0 (so readers see the
// attempt running), then flushes in the background until Close. The
// returned error is only about key; store problems are retried and logged
// (see Writer). The first store round trip runs on ctx (and OpTimeout),
// the background flushes on OpTimeout alone.
func (s *Store) Open(ctx context.Context, key Key) (*Writer, error) {
	if err := key.validate(); err != nil {
		return nil, err
	}
	w := &Writer{
		s:      s,
		key:    key,
		prefix: key.prefix() + "/",
		nonce:  newNonce(),
		log:    s.log.With("log_key", key.String(), "log_store", s.s.String()),
		kick:   make(chan struct{}, 1),
		flushq: make(chan chan error),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	octx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	w.report(w.flush(octx))
	cancel()
	go w.loop(context.WithoutCancel(ctx))
	return w, nil
}

// Write buffers p. It fails only after Close.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, ErrClosed
	}
	w.appendLocked(p)
	if len(w.buf) >= w.s.opts.ChunkBytes {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

func (w *Writer) appendLocked(p []byte) {
	if w.held+len(p) > w.s.opts.MaxBuffered {
		w.dropped += int64(len(p))
		return
	}
	if w.dropped > 0 {
		note := fmt.Appendf(nil, "\n[agentflow: %d bytes of this log were dropped: the log store was unreachable]\n", w.dropped)
		w.dropped = 0
		w.buf = append(w.buf, note...)
		w.held += len(note)
	}
	w.buf = append(w.buf, p...)
	w.held += len(p)
}

func (w *Writer) loop(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(w.s.opts.FlushInterval)
	defer t.Stop()
	for {
		var reply chan error
		select {
		case <-w.stop:
			return
		case <-t.C:
		case <-w.kick:
		case reply = <-w.flushq:
		}
		octx, cancel := context.WithTimeout(ctx, w.s.opts.OpTimeout)
		err := w.flush(octx)
		cancel()
		w.report(err)
		if reply != nil {
			reply <- err
		}
	}
}

// Flush stores what is buffered now and returns the store's answer (the
// writer keeps what failed and retries it, as at every flush).
func (w *Writer) Flush(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case w.flushq <- reply:
	case <-w.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// report logs a flush failure once per outage, and the recovery.
func (w *Writer) report(err error) {
	switch {
	case err != nil && !w.failing:
		w.failing = true
		w.log.Warn("step log: store the running attempt's log (retrying at the next flush)", "error", err)
	case err == nil && w.failing:
		w.failing = false
		w.log.Info("step log: store reachable again")
	}
}

// flush cuts the buffer into chunks and stores every pending chunk in
// order. A chunk that fails stays pending (same bytes, same seq), so a
// retry writes exactly what the failed Put would have.
func (w *Writer) flush(ctx context.Context) error {
	w.mu.Lock()
	for len(w.buf) > 0 {
		n := min(len(w.buf), w.s.opts.ChunkBytes)
		w.pending = append(w.pending, w.buf[:n:n])
		w.buf = w.buf[n:]
	}
	w.buf = nil
	if !w.started && len(w.pending) == 0 {
		w.pending = append(w.pending, nil) // chunk 0 exists from the start
	}
	w.mu.Unlock()

	if !w.started {
		if err := w.clearStale(ctx); err != nil {
			return err
		}
		w.started = true
	}
	for {
		w.mu.Lock()
		if len(w.pending) == 0 {
			w.mu.Unlock()
			return nil
		}
		chunk, seq := w.pending[0], w.next
		w.mu.Unlock()
		if seq >= MaxChunks {
			// Readers take no more; what follows is dropped (the end
			// marker still closes the log).
			w.mu.Lock()
			if !w.full {
				w.full = true
				w.log.Warn("step log: chunk limit reached, dropping the rest of the attempt's log", "max_chunks", MaxChunks)
			}
			w.pending, w.held = nil, 0
			w.mu.Unlock()
			return nil
		}
		_, err := w.s.s.Put(ctx, w.prefix+chunkName(seq, w.nonce), bytes.NewReader(chunk),
			objstore.PutOptions{IfAbsent: true, Size: int64(len(chunk)), NoSync: true})
		// ErrExists under our own nonce: an earlier try of this very chunk
		// was stored although its Put reported an error.
		if err != nil && !errors.Is(err, objstore.ErrExists) {
			return fmt.Errorf("store log chunk %d of %s: %w", seq, w.key, err)
		}
		w.mu.Lock()
		w.pending = w.pending[1:]
		w.held -= len(chunk)
		w.stored += int64(len(chunk))
		w.next++
		w.mu.Unlock()
	}
}

// clearStale deletes what another delivery of the attempt stored (its
// chunks and end marker), so the log this Writer stores is the one shown.
func (w *Writer) clearStale(ctx context.Context) error {
	infos, err := w.s.s.List(ctx, w.prefix)
	if err != nil {
		return fmt.Errorf("list earlier log of %s: %w", w.key, err)
	}
	for _, info := range infos {
		if err := w.s.s.Delete(ctx, info.Key); err != nil {
			return fmt.Errorf("delete earlier log of %s: %w", w.key, err)
		}
	}
	return nil
}

// Close stores what is buffered plus tr.Text and then the end marker, on
// ctx (give it a bound that survives the attempt's cancellation). After a
// failed Close the log stays readable up to what was stored, without an
// end marker. ErrSuperseded: a later Open of the same key replaced this
// log. Close is not idempotent: call it once.
func (w *Writer) Close(ctx context.Context, tr Trailer) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.closed = true
	w.appendLocked(tr.Text)
	if w.dropped > 0 {
		w.appendLocked(nil) // the note for what was dropped
	}
	w.mu.Unlock()
	close(w.stop)
	<-w.done

	if err := w.flush(ctx); err != nil {
		return err
	}
	// A later delivery deletes our chunk 0 when it opens: then our end
	// marker would name a log no reader shows, or hide the live one.
	if _, err := w.s.s.Stat(ctx, w.prefix+chunkName(0, w.nonce)); err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("log %s: %w", w.key, ErrSuperseded)
		}
		return fmt.Errorf("check log %s before its end marker: %w", w.key, err)
	}
	w.mu.Lock()
	m := endMarker{Version: endVersion, Writer: w.nonce, Chunks: w.next, Bytes: w.stored,
		FinishedAt: time.Now().UTC(), Outcome: truncateOutcome(tr.Outcome)}
	w.mu.Unlock()
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode end marker of %s: %w", w.key, err)
	}
	if _, err := w.s.s.Put(ctx, w.prefix+endName, bytes.NewReader(data), objstore.PutOptions{Size: int64(len(data)), NoSync: true}); err != nil {
		return fmt.Errorf("store end marker of %s: %w", w.key, err)
	}
	return nil
}

func truncateOutcome(s string) string {
	if len(s) <= maxOutcome {
		return s
	}
	i := maxOutcome
	for i > 0 && s[i]&0xC0 == 0x80 { // never split a UTF-8 sequence
		i--
	}
	return s[:i]
}
