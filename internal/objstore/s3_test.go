package objstore_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/objstore"
)

// hungS3 is a server that misbehaves the way a hung S3 endpoint does.
// Real MinIO covers the protocol (s3_integration_test.go); these cover
// what MinIO cannot be made to do on demand.
func newS3(t *testing.T, endpoint string) *objstore.S3 {
	t.Helper()
	s, err := objstore.NewS3(objstore.S3Config{
		Bucket: "bucket", Endpoint: endpoint, AccessKey: "k", SecretKey: "s",
		HeaderTimeout: 200 * time.Millisecond, ReadStall: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	return s
}

// TestS3HungServer: a server that accepts connections and never answers
// fails each operation as unavailable, ended by the store's own timeouts,
// not by the caller's context.
func TestS3HungServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { <-done; c.Close() }() // hold it open, say nothing
		}
	}()
	s := newS3(t, "http://"+l.Addr().String())
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err = s.Stat(ctx, "k")
	requireUnavailable(t, err, l.Addr().String()+": request timed out")
	require.NoError(t, ctx.Err())
	_, err = s.Put(ctx, "k", strings.NewReader("x"), objstore.PutOptions{})
	requireUnavailable(t, err, l.Addr().String()+": request timed out")
	require.NoError(t, ctx.Err())
}

// TestS3StalledBody: an object whose body stops arriving fails the read as
// unavailable instead of blocking the reader forever.
func TestS3StalledBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1048576")
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("first bytes"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // then nothing, until the client gives up
	}))
	t.Cleanup(srv.Close)
	s := newS3(t, srv.URL)
	rc, err := s.Get(t.Context(), "k")
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.Equal(t, "first bytes", string(b))
	requireUnavailable(t, err, strings.TrimPrefix(srv.URL, "http://")+": read stalled")
	require.NoError(t, t.Context().Err())
}
