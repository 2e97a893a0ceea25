package logstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"
)

// DefaultPoll is how often Follow looks for new chunks.
const DefaultPoll = time.Second

// FollowOptions tune Follow.
type FollowOptions struct {
	// Poll is the interval between looks at the store (default DefaultPoll).
	Poll time.Duration
	// Stop is asked once per poll, before the store is read, whether to
	// stop waiting for the end marker (the run has closed, a later attempt
	// started: the writer died without one). What is stored is still
	// printed; then Follow returns ErrStopped. nil waits for the end
	// marker or ctx.
	Stop func(ctx context.Context) (bool, error)
	// TailLines > 0 prints only the last lines of what is stored when
	// Follow starts, then everything new.
	TailLines int
}

// Follow writes the attempt's log to w as its chunks appear and returns
// nil once the end marker is seen and every chunk it counts is written,
// ErrStopped when opts.Stop says so, or ctx's error. If the attempt is
// delivered again while followed, Follow says so and continues with the
// new delivery's log from its start.
func (s *Store) Follow(ctx context.Context, key Key, w io.Writer, opts FollowOptions) error {
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	t := time.NewTicker(opts.Poll)
	defer t.Stop()
	writer, next := "", 0
	first, rescanned := true, false
	for {
		stop := false
		if opts.Stop != nil {
			var err error
			if stop, err = opts.Stop(ctx); err != nil {
				return err
			}
		}
		v, err := s.scan(ctx, key)
		if err != nil {
			return err
		}
		if v.writer == "" && v.legacy != nil {
			data, err := s.readLegacy(ctx, key, MaxReadBytes)
			if err != nil {
				return err
			}
			_, err = w.Write(TailLines(data, opts.TailLines))
			return err
		}
		if v.writer != writer {
			if writer != "" {
				if _, err := io.WriteString(w, "\n[agentflow: this attempt was delivered again; the new delivery's log follows]\n"); err != nil {
					return err
				}
			}
			writer, next = v.writer, 0
		}
		var buf bytes.Buffer
		for _, c := range v.chunks {
			if c.seq < next {
				continue
			}
			if c.seq != next {
				break // chunks are stored in order; wait for the gap to fill
			}
			data, err := s.readChunk(ctx, c)
			if err != nil {
				return err
			}
			buf.Write(data)
			next++
		}
		out := buf.Bytes()
		if first {
			first = false
			out = TailLines(out, opts.TailLines)
			if v.ignored > 0 {
				out = append(ignoredNote(v.ignored), out...)
			}
		}
		if _, err := w.Write(out); err != nil {
			return err
		}
		switch {
		case v.endErr != nil:
			_, err := fmt.Fprintf(w, "\n[agentflow: %v]\n", v.endErr)
			return err
		case v.end != nil && next >= v.end.Chunks:
			return nil
		case v.end != nil && !rescanned:
			// A listing may miss the last chunks next to the end marker
			// (a directory read while they were created): look once more.
			rescanned = true
			continue
		case v.end != nil:
			_, err := fmt.Fprintf(w, "\n[agentflow: chunks %d–%d of this log are missing from the store]\n", next, v.end.Chunks-1)
			return err
		case stop:
			return ErrStopped
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
