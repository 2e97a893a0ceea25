package exechost

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type gatedWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	started chan struct{} // closed at the first Write
	once    sync.Once
	release chan struct{}
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.started) })
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func TestLiveStreamDeliversInOrderAndNotesDrops(t *testing.T) {
	w := &gatedWriter{started: make(chan struct{}), release: make(chan struct{})}
	l := NewLiveStream(w)
	_, _ = l.Write([]byte("first\n"))
	<-w.started // the goroutine holds "first" and is stuck in the writer
	big := bytes.Repeat([]byte("x"), LiveStreamBuffer)
	n, err := l.Write([]byte("second\n"))
	require.NoError(t, err)
	require.Equal(t, 7, n)
	n, err = l.Write(big) // does not fit next to "second": dropped, not blocked
	require.NoError(t, err)
	require.Equal(t, len(big), n)
	_, _ = l.Write([]byte("third\n"))
	close(w.release)
	l.Close(time.Minute)
	_, _ = l.Write([]byte("after close\n"))
	require.Equal(t, "first\nsecond\n\n[agentflow: 1048576 bytes of output not streamed live: the log writer fell behind]\nthird\n", w.buf.String())
}

func TestLiveStreamNil(t *testing.T) {
	var l *LiveStream = NewLiveStream(nil)
	require.Nil(t, l)
	n, err := l.Write([]byte("x"))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	l.Close(time.Second)
}

func TestLiveStreamCloseDoesNotWaitForAStuckWriter(t *testing.T) {
	w := &gatedWriter{started: make(chan struct{}), release: make(chan struct{})}
	defer close(w.release)
	l := NewLiveStream(w)
	_, _ = l.Write([]byte(strings.Repeat("y", 10)))
	<-w.started
	l.Close(time.Millisecond) // returns although the writer never does
}
