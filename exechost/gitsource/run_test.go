package gitsource

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBoundedBuffer(t *testing.T) {
	overflowed := 0
	b := &boundedBuffer{max: MaxStderr, onOverflow: func() { overflowed++ }}
	chunk := bytes.Repeat([]byte("e"), 10_000)
	for range 20 { // 200 000 bytes, well past the cap
		n, err := b.Write(chunk)
		require.NoError(t, err, "a full buffer never fails git's write")
		require.Equal(t, len(chunk), n)
	}
	require.True(t, b.truncated)
	require.Equal(t, 1, overflowed, "overflow reported once")
	require.Len(t, b.Bytes(), MaxStderr)
	require.True(t, strings.HasSuffix(b.String(), truncatedMarker))
	require.Len(t, b.String(), MaxStderr+len(truncatedMarker))

	small := &boundedBuffer{max: 10}
	_, _ = small.Write([]byte("0123456789"))
	require.False(t, small.truncated, "exactly at the cap is not truncated")
	require.Equal(t, "0123456789", small.String())
}

// TestGitStderrIsBounded: every git process writes its stderr into a
// bounded buffer (git itself cuts one message at 4 KiB, but not the number
// of messages), and that buffer is what an error reports.
func TestGitStderrIsBounded(t *testing.T) {
	im, err := New(Config{})
	require.NoError(t, err)
	if im.git == "" {
		t.Skip("git is not installed")
	}
	cmd, stderr := im.command(context.Background(), t.TempDir(), "rev-parse", "HEAD")
	require.Same(t, stderr, cmd.Stderr)
	require.Equal(t, MaxStderr, stderr.max)
	_, err = im.output(context.Background(), t.TempDir(), 1024, "rev-parse", "--verify", "HEAD")
	var ge *gitError
	require.ErrorAs(t, err, &ge, "not a git directory")
	require.NotEmpty(t, ge.stderr)
	require.Contains(t, err.Error(), strings.TrimSpace(ge.stderr))
}
