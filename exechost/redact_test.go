package exechost

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// chunkReader returns at most n bytes per Read, so occurrences straddle
// read boundaries at every possible offset.
type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

// sources are the ways a Redactor's source may deliver the same bytes.
func sources(data []byte, maxLen int) map[string]io.Reader {
	out := map[string]io.Reader{
		"whole":    bytes.NewReader(data),
		"one byte": iotest.OneByteReader(bytes.NewReader(data)),
		"half":     iotest.HalfReader(bytes.NewReader(data)),
		"data+EOF": iotest.DataErrReader(bytes.NewReader(data)),
	}
	for n := 2; n <= maxLen+2; n++ {
		out["chunks of "+strings.Repeat("#", n)] = &chunkReader{r: bytes.NewReader(data), n: n}
	}
	return out
}

func redactAll(t *testing.T, r *Redactor, src io.Reader) []byte {
	t.Helper()
	r.Reset(src)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	return got
}

func TestRedactor(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		in     string
		want   string
	}{
		{name: "none", values: []string{"secret"}, in: "nothing here", want: "nothing here"},
		{name: "empty input", values: []string{"secret"}, in: "", want: ""},
		{name: "middle", values: []string{"secret"}, in: "a secret b", want: "a ****** b"},
		{name: "start and end", values: []string{"tok"}, in: "tok-x-tok", want: "***-x-***"},
		{name: "whole", values: []string{"tok"}, in: "tok", want: "***"},
		{name: "repeated", values: []string{"ab"}, in: "ababab", want: "******"},
		{name: "self-overlapping", values: []string{"aa"}, in: "xaaax", want: "x***x"},
		{name: "overlapping values", values: []string{"abc", "bcd"}, in: "xabcdx", want: "x****x"},
		{name: "prefix of another", values: []string{"ab", "abcd"}, in: "abcd ab abc", want: "**** ** **c"},
		{name: "contained in another", values: []string{"bc", "abcd"}, in: "abcd bc", want: "**** **"},
		{name: "partial is not an occurrence", values: []string{"secret"}, in: "secre ecret", want: "secre ecret"},
		{name: "empty and duplicate values", values: []string{"", "k", "k"}, in: "kak", want: "*a*"},
		{name: "longer than the input", values: []string{"a-very-long-secret"}, in: "a-very", want: "a-very"},
		{name: "binary", values: []string{"\x00\xff\x00"}, in: "\x01\x00\xff\x00\xff\x00\x02", want: "\x01*****\x02"},
		{name: "not utf-8", values: []string{"\xc3\x28"}, in: "\xc3\xc3\x28\x28", want: "\xc3**\x28"},
		{name: "json-escaped form", values: []string{`a"b`, `a\"b`}, in: `{"k":"a\"b"} a"b`, want: `{"k":"****"} ***`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, string(RedactBytes([]byte(tt.in), tt.values)), "RedactBytes")
			r := NewRedactor(tt.values)
			require.NotNil(t, r)
			for name, src := range sources([]byte(tt.in), r.maxLen) {
				require.Equal(t, tt.want, string(redactAll(t, r, src)), "source %s", name)
			}
		})
	}
}

func TestNewRedactorWithoutValues(t *testing.T) {
	require.Nil(t, NewRedactor(nil))
	require.Nil(t, NewRedactor([]string{"", ""}))
}

// TestRedactorLargeFile puts occurrences around every multiple of the read
// chunk, where a Redactor that forgot its held-back tail would miss them.
func TestRedactorLargeFile(t *testing.T) {
	const secret = "s3cr3t-VALUE-0123456789"
	rng := rand.New(rand.NewPCG(1, 2))
	offsets := []int{-len(secret), -len(secret) + 1, -7, -1, 0, 1}
	data := make([]byte, (len(offsets)+1)*RedactChunk+777)
	for i := range data {
		data[i] = byte(rng.UintN(256))
	}
	// One occurrence near each chunk boundary, each at another offset.
	var at []int
	for k, d := range offsets {
		at = append(at, (k+1)*RedactChunk+d)
	}
	at = append(at, 0, len(data)-len(secret))
	for _, p := range at {
		copy(data[p:], secret)
	}
	want := RedactBytes(data, []string{secret})
	require.NotContains(t, string(want), secret)
	for _, p := range at {
		require.Equal(t, strings.Repeat("*", len(secret)), string(want[p:p+len(secret)]))
	}

	r := NewRedactor([]string{secret})
	for name, src := range map[string]io.Reader{
		"whole":       bytes.NewReader(data),
		"half":        iotest.HalfReader(bytes.NewReader(data)),
		"odd chunks":  &chunkReader{r: bytes.NewReader(data), n: 4093},
		"tiny chunks": &chunkReader{r: bytes.NewReader(data), n: 5},
	} {
		got := redactAll(t, r, src)
		require.Len(t, got, len(data), name)
		require.True(t, bytes.Equal(want, got), "source %s", name)
	}
}

// TestRedactorMatchesOracle compares the stream with RedactBytes on random
// data over a small alphabet (many overlapping, prefix and adjacent
// occurrences) and random chunking.
func TestRedactorMatchesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abc"[rng.IntN(3)]
		}
		return string(b)
	}
	for i := 0; i < 300; i++ {
		values := make([]string, 1+rng.IntN(3))
		for j := range values {
			values[j] = word(1 + rng.IntN(6))
		}
		data := []byte(word(rng.IntN(300)))
		r := NewRedactor(values)
		got := redactAll(t, r, &chunkReader{r: bytes.NewReader(data), n: 1 + rng.IntN(9)})
		require.Equal(t, string(RedactBytes(data, values)), string(got), "values %q data %q", values, data)
	}
}

func TestRedactorReportsSourceError(t *testing.T) {
	boom := errors.New("boom")
	r := NewRedactor([]string{"x"})
	r.Reset(io.MultiReader(strings.NewReader(strings.Repeat("y", 100)), iotest.ErrReader(boom)))
	_, err := io.ReadAll(r)
	require.ErrorIs(t, err, boom)

	// Reset drops the failed source's state.
	require.Equal(t, "a*b", string(redactAll(t, r, strings.NewReader("axb"))))
}

func TestRedactorAllocatesOnce(t *testing.T) {
	r := NewRedactor([]string{"secret", "other"})
	data := bytes.Repeat([]byte("0123 secret 4567 "), 10000)
	buf := make([]byte, 8<<10)
	allocs := testing.AllocsPerRun(5, func() {
		r.Reset(bytes.NewReader(data))
		if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf); err != nil {
			t.Fatal(err)
		}
	})
	require.LessOrEqual(t, allocs, 2.0, "per entry only the source wrapper may allocate")
}
