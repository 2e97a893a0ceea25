package activities

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScrubStreamSplitSecrets: however a stream is cut into Writes, no
// secret form survives, and the result is what scrubbing it whole gives.
func TestScrubStreamSplitSecrets(t *testing.T) {
	secrets := []string{"tok-S3CR3T-value", "line1\nline2-secret", "ab"}
	s := newScrubber(secrets)
	input := "start t\nusing tok-S3CR3T-value now\nb64 " + base64.StdEncoding.EncodeToString([]byte("tok-S3CR3T-value")) +
		"\npem line1\nline2-secret end\nshort ab and a\nprefix at the end tok-S3CR"
	want := s.String(input)
	require.NotContains(t, want, "tok-S3CR3T-value")

	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 500; i++ {
		var out bytes.Buffer
		z := s.Stream(&out)
		rest := input
		for rest != "" {
			n := 1 + rng.IntN(min(len(rest), 12))
			if i == 0 {
				n = 1 // byte by byte
			}
			_, err := z.Write([]byte(rest[:n]))
			require.NoError(t, err)
			rest = rest[n:]
		}
		require.NoError(t, z.Flush())
		require.Equal(t, want, out.String(), "split %d", i)
		for _, f := range s.forms {
			require.NotContains(t, out.String(), f)
		}
	}
}

// TestScrubStreamPassesLinesAtOnce: only a tail that could begin a secret
// is held back, so a running tool's lines reach the log while it runs.
func TestScrubStreamPassesLinesAtOnce(t *testing.T) {
	s := newScrubber([]string{"tok-S3CR3T-value"})
	var out bytes.Buffer
	z := s.Stream(&out)
	_, err := z.Write([]byte("working on it\n"))
	require.NoError(t, err)
	require.Equal(t, "working on it\n", out.String())

	_, err = z.Write([]byte("key tok-S3C")) // may be the start of the secret
	require.NoError(t, err)
	require.Equal(t, "working on it\nkey ", out.String())
	_, err = z.Write([]byte("R3T-value\n"))
	require.NoError(t, err)
	require.Equal(t, "working on it\nkey ***\n", out.String())

	_, err = z.Write([]byte("tok-S3CX no\n")) // diverged: passes
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(out.String(), "tok-S3CX no\n"))
	n, last := z.Written()
	require.Equal(t, int64(out.Len()), n)
	require.Equal(t, byte('\n'), last)

	// Without secrets everything passes straight through.
	var plain bytes.Buffer
	zp := newScrubber(nil).Stream(&plain)
	_, err = zp.Write([]byte("tok-"))
	require.NoError(t, err)
	require.Equal(t, "tok-", plain.String())
}
