package exechost

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// scrubAll replaces every form the way the activities' scrubber does.
func scrubAll(s string, forms []string) string {
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, "***")
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// leaks reports whether any run of base64 or hex characters in s decodes,
// at any alignment, to text containing 6 consecutive bytes of secret.
func leaks(s, secret string) bool {
	isB64 := func(r rune) bool {
		return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("+/-_", r)
	}
	hit := func(b []byte) bool {
		for i := 0; i+6 <= len(secret); i++ {
			if strings.Contains(string(b), secret[i:i+6]) {
				return true
			}
		}
		return false
	}
	for _, run := range strings.FieldsFunc(s, func(r rune) bool { return !isB64(r) }) {
		std := strings.NewReplacer("-", "+", "_", "/").Replace(run)
		for off := 0; off < 4 && off < len(std); off++ {
			x := std[off:]
			x = x[:len(x)/4*4]
			if b, err := base64.RawStdEncoding.DecodeString(x); err == nil && hit(b) {
				return true
			}
		}
		for off := 0; off < 2 && off < len(run); off++ {
			x := run[off:]
			x = x[:len(x)/2*2]
			if b, err := hex.DecodeString(x); err == nil && hit(b) {
				return true
			}
		}
	}
	return hit([]byte(s))
}

func TestSecretFormsCatchEveryAlignment(t *testing.T) {
	secrets := []string{"hunter2-S3CR3T-value", "p@ss/w?rd&x=1 +ok", "abcdef", "\x00\xff binary \x10 secret", `quo"te<and>&amp`}
	encs := map[string]func([]byte) string{
		"std":     base64.StdEncoding.EncodeToString,
		"url":     base64.URLEncoding.EncodeToString,
		"raw std": base64.RawStdEncoding.EncodeToString,
		"raw url": base64.RawURLEncoding.EncodeToString,
		"hex":     hex.EncodeToString,
		"HEX":     func(b []byte) string { return strings.ToUpper(hex.EncodeToString(b)) },
	}
	for _, secret := range secrets {
		forms := SecretForms([]string{secret})
		for name, enc := range encs {
			for pre := 0; pre < 6; pre++ {
				for _, suf := range []string{"", "x", "yz", "tail of the text"} {
					text := strings.Repeat("P", pre) + secret + suf
					encoded := "Authorization: Basic " + enc([]byte(text)) + "\n"
					t.Run(fmt.Sprintf("%q/%s/%d/%q", secret, name, pre, suf), func(t *testing.T) {
						if len(secret) >= 8 || name == "hex" || name == "HEX" || pre%3 == 0 {
							out := scrubAll(encoded, forms)
							require.False(t, leaks(out, secret), "%s -> %s", encoded, out)
						}
					})
				}
			}
		}
		// URL and JSON escaping.
		for _, s := range []string{url.QueryEscape(secret), url.PathEscape(secret), "https://x/?q=" + url.QueryEscape(secret) + "&y=1"} {
			require.NotContains(t, scrubAll(s, forms), url.QueryEscape(secret)[:min(6, len(secret))], s)
		}
		j, err := json.Marshal(map[string]string{"k": secret})
		require.NoError(t, err)
		require.Equal(t, `{"k":"***"}`, scrubAll(string(j), forms))
	}
}

func TestSecretFormsShortSecrets(t *testing.T) {
	// Below MinEncodedSecret only the value and its JSON forms count:
	// encodings of a 5-byte value are noise-sized.
	require.ElementsMatch(t, []string{"ab\"cd", `ab\"cd`}, SecretForms([]string{"ab\"cd"}))
	require.Empty(t, SecretForms([]string{"", ""}))
	forms := SecretForms([]string{"abcdef"})
	require.Contains(t, forms, base64.StdEncoding.EncodeToString([]byte("abcdef")))
	require.Contains(t, forms, "616263646566")
	require.Contains(t, forms, "616263646566")
	for _, f := range forms {
		require.GreaterOrEqual(t, len(f), 6, "no form shorter than the value: %q", f)
	}
	// Longest first, so a containing form is replaced whole.
	for i := 1; i < len(forms); i++ {
		require.GreaterOrEqual(t, len(forms[i-1]), len(forms[i]))
	}
}

func TestRedactBytesWithSecretForms(t *testing.T) {
	secret := "tok-S3CR3T-value"
	forms := SecretForms([]string{secret})
	for pre := 0; pre < 3; pre++ {
		text := strings.Repeat("x", pre) + secret + "!"
		for _, data := range []string{base64.StdEncoding.EncodeToString([]byte(text)), base64.URLEncoding.EncodeToString([]byte(text)), hex.EncodeToString([]byte(text))} {
			out := string(RedactBytes([]byte(data), forms))
			require.Len(t, out, len(data), "same length")
			require.False(t, leaks(out, secret), "%s -> %s", data, out)
		}
	}
}
