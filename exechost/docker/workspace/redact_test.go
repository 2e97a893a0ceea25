package workspace

import (
	"archive/tar"
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFilterRedacts(t *testing.T) {
	const secret = "tok-123"
	body := strings.Repeat("x", 70000) + secret + strings.Repeat("y", 3) + secret
	layer := makeTar(t,
		entry{name: "d", typ: tar.TypeDir, mode: 0o755},
		entry{name: "d/big.txt", typ: tar.TypeReg, body: body},
		entry{name: "small.txt", typ: tar.TypeReg, body: "a " + secret + " b"},
		entry{name: "clean.txt", typ: tar.TypeReg, body: "tok-12 not it"},
		entry{name: "link", typ: tar.TypeSymlink, link: "d/big.txt"},
	)
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	f := NewFilter(big)
	f.Redact(Redaction{Values: []string{secret, ""}})
	require.NoError(t, f.Copy(tw, bytes.NewReader(layer)))
	require.NoError(t, tw.Close())
	require.NotContains(t, out.String(), secret)

	bodies := map[string]string{}
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		require.Len(t, b, int(h.Size), "sizes describe what is stored")
		bodies[h.Name] = string(b)
	}
	stars := strings.Repeat("*", len(secret))
	require.Equal(t, strings.Repeat("x", 70000)+stars+"yyy"+stars, bodies["d/big.txt"])
	require.Equal(t, "a "+stars+" b", bodies["small.txt"])
	require.Equal(t, "tok-12 not it", bodies["clean.txt"])
}

func TestFilterRefusesSecretNames(t *testing.T) {
	const secret = "tok-123"
	tests := []struct {
		name   string
		layer  []byte
		values []string // default: secret
	}{
		{"file", makeTar(t, entry{name: "leak-" + secret + ".txt", typ: tar.TypeReg, body: "x"}), nil},
		{"directory", makeTar(t, entry{name: "a/" + secret, typ: tar.TypeDir, mode: 0o755}), nil},
		{"symlink target", makeTar(t, entry{name: "l", typ: tar.TypeSymlink, link: secret}), nil},
		// Refusals of unsafe entries quote the name: the secret check comes first.
		{"unsafe name", makeTar(t, entry{name: "../" + secret, typ: tar.TypeReg, body: "x"}), nil},
		{"hard link target", makeTar(t, entry{name: "h", typ: tar.TypeLink, link: secret}), nil},
		{"joined by cleaning", makeTar(t, entry{name: "ab//cd/./x", typ: tar.TypeReg, body: "x"}), []string{"b/c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Entries after the refused one: the filter must drain them.
			layer := append(bytes.Clone(tt.layer[:len(tt.layer)-1024]),
				makeTar(t, entry{name: "after.txt", typ: tar.TypeReg, body: strings.Repeat("z", 5000)})...)
			var out bytes.Buffer
			tw := tar.NewWriter(&out)
			f := NewFilter(big)
			values := tt.values
			if values == nil {
				values = []string{secret}
			}
			f.Redact(Redaction{Values: values})
			src := bytes.NewReader(layer)
			err := f.Copy(tw, src)
			require.ErrorIs(t, err, ErrSecretName)
			require.NotErrorIs(t, err, ErrUnsafeEntry)
			for _, v := range values {
				require.NotContains(t, err.Error(), v, "the error never carries the name")
			}
			require.Zero(t, src.Len(), "the rest of the stream is drained, so tar ends normally")
			require.NotContains(t, out.String(), "after.txt", "nothing after the refusal is written")
		})
	}
}

// TestFilterKeepsInheritedNames: an entry the workspace was provisioned
// with keeps its name (it is stored already, and not this step's doing);
// a changed symlink target or a new entry is still refused.
func TestFilterKeepsInheritedNames(t *testing.T) {
	const secret = "gate-open.txt"
	base := makeTar(t,
		entry{name: "d", typ: tar.TypeDir, mode: 0o755},
		entry{name: "d/" + secret, typ: tar.TypeReg, body: "open"},
		entry{name: "l", typ: tar.TypeSymlink, link: "d/" + secret},
		entry{name: "plain", typ: tar.TypeReg, body: "p"},
	)
	imp := NewFilter(big)
	imp.RecordNames()
	var sink bytes.Buffer
	require.NoError(t, imp.Copy(tar.NewWriter(&sink), bytes.NewReader(base)))
	require.Equal(t, map[string]string{"d": "", "d/" + secret: "", "l": "d/" + secret, "plain": ""}, imp.Names())

	export := func(layer []byte) (string, error) {
		var out bytes.Buffer
		tw := tar.NewWriter(&out)
		f := NewFilter(big)
		f.Redact(Redaction{Values: []string{secret}, Inherited: imp.Names()})
		if err := f.Copy(tw, bytes.NewReader(layer)); err != nil {
			return "", err
		}
		require.NoError(t, tw.Close())
		return out.String(), nil
	}
	out, err := export(makeTar(t,
		entry{name: "./d", typ: tar.TypeDir, mode: 0o755},
		entry{name: "./d/" + secret, typ: tar.TypeReg, body: "reads " + secret},
		entry{name: "./l", typ: tar.TypeSymlink, link: "d/" + secret},
	))
	require.NoError(t, err)
	require.Contains(t, out, "d/"+secret, "the inherited name is kept")
	require.Contains(t, out, "reads "+strings.Repeat("*", len(secret)), "content is still redacted")

	for name, layer := range map[string][]byte{
		"new file":        makeTar(t, entry{name: "e/" + secret, typ: tar.TypeReg, body: "x"}),
		"retargeted link": makeTar(t, entry{name: "plain", typ: tar.TypeSymlink, link: secret}),
		"moved link":      makeTar(t, entry{name: "l2", typ: tar.TypeSymlink, link: "d/" + secret}),
	} {
		_, err := export(layer)
		require.ErrorIs(t, err, ErrSecretName, name)
	}
}
