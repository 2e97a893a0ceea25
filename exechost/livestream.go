package exechost

import (
	"fmt"
	"io"
	"sync"
	"time"
)

const (
	// LiveStreamBuffer is how much a LiveStream queues for a writer that
	// falls behind; beyond it, bytes are dropped (and noted).
	LiveStreamBuffer = 1 << 20
	// LiveStreamCloseWait bounds how long Close waits for the writer to
	// take what is queued.
	LiveStreamCloseWait = 2 * time.Second
)

// LiveStream hands a command's output to a caller's writer (ExecRequest.
// Stderr) as it is produced, without letting that writer hold up the
// command: Write queues (up to LiveStreamBuffer bytes, then drops and
// later writes a note saying how much), never blocks on the writer and
// never fails; one goroutine delivers the queue in order; a writer that
// returns an error is not called again. Every host uses it, so the rule is
// written once.
type LiveStream struct {
	w io.Writer

	mu      sync.Mutex
	q       []byte
	dropped int64
	closed  bool
	failed  bool

	wake chan struct{} // buffered(1)
	done chan struct{}
}

// NewLiveStream starts delivering to w. A nil w yields a nil *LiveStream,
// whose methods do nothing, so hosts need no special case.
func NewLiveStream(w io.Writer) *LiveStream {
	if w == nil {
		return nil
	}
	l := &LiveStream{w: w, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go l.loop()
	return l
}

// Write queues p for the writer. It always reports success: the exec's
// own copy of the output is elsewhere, the live one is best effort.
func (l *LiveStream) Write(p []byte) (int, error) {
	if l == nil {
		return len(p), nil
	}
	l.mu.Lock()
	switch {
	case l.closed || l.failed:
	case len(l.q)+len(p) > LiveStreamBuffer:
		l.dropped += int64(len(p))
	default:
		l.noteDroppedLocked()
		l.q = append(l.q, p...)
	}
	l.mu.Unlock()
	l.signal()
	return len(p), nil
}

func (l *LiveStream) noteDroppedLocked() {
	if l.dropped > 0 {
		l.q = fmt.Appendf(l.q, "\n[agentflow: %d bytes of output not streamed live: the log writer fell behind]\n", l.dropped)
		l.dropped = 0
	}
}

func (l *LiveStream) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *LiveStream) loop() {
	defer close(l.done)
	for {
		l.mu.Lock()
		for len(l.q) == 0 && !l.closed {
			l.mu.Unlock()
			<-l.wake
			l.mu.Lock()
		}
		data, closed := l.q, l.closed
		l.q = nil
		l.mu.Unlock()
		if len(data) > 0 {
			if _, err := l.w.Write(data); err != nil {
				l.mu.Lock()
				l.failed, l.q = true, nil
				l.mu.Unlock()
				return
			}
		}
		if closed {
			l.mu.Lock()
			empty := len(l.q) == 0
			l.mu.Unlock()
			if empty {
				return
			}
		}
	}
}

// Close ends the stream: later Writes are ignored, what is queued (and a
// note of what was dropped) goes to the writer, and Close waits for that
// up to wait. A writer stuck for longer keeps the delivering goroutine
// until it returns; the exec does not wait for it.
func (l *LiveStream) Close(wait time.Duration) {
	if l == nil {
		return
	}
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		if !l.failed {
			l.noteDroppedLocked()
		}
	}
	l.mu.Unlock()
	l.signal()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
	}
}
