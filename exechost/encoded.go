package exechost

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"sort"
	"strings"
)

// MinEncodedSecret is the shortest secret whose encoded forms are redacted
// too. A shorter secret's encodings are a few characters that occur in
// ordinary output by chance: redacting them would destroy data and tell a
// reader which bytes matched.
const MinEncodedSecret = 6

// minBase64Form is the shortest alignment-stable base64 fragment redacted
// (6 bytes of secret): a 4-character fragment matches noise.
const minBase64Form = 8

// SecretForms returns every form of values that must not leave a step:
// each non-empty value, its JSON-escaped forms and, for values of at least
// MinEncodedSecret bytes, its common encodings: standard and URL-safe
// base64 (the whole value, padded and unpadded, plus the fragments that stay
// the same whatever the value's offset in a longer encoded text, for each
// of the 3 alignments), hex in lower and upper case, URL query and path
// escaping. The result is sorted longest first, then bytewise, so a
// replacer that tries patterns in order replaces a containing form whole.
//
// What it cannot catch (documented in docs/security/secrets-encoding.md):
// any other transformation — encryption, compression, reversal, a custom
// alphabet, a secret split across lines.
func SecretForms(values []string) []string {
	set := map[string]struct{}{}
	add := func(s string) {
		if s != "" {
			set[s] = struct{}{}
		}
	}
	for _, v := range values {
		if v == "" {
			continue
		}
		add(v)
		for _, esc := range jsonForms(v) {
			add(esc)
		}
		if len(v) < MinEncodedSecret {
			continue
		}
		b := []byte(v)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			add(enc.EncodeToString(b)) // the value alone, padded
			for _, f := range base64Fragments(enc, b) {
				add(f)
			}
		}
		h := hex.EncodeToString(b)
		add(h)
		add(strings.ToUpper(h))
		add(url.QueryEscape(v))
		add(url.PathEscape(v))
	}
	forms := make([]string, 0, len(set))
	for f := range set {
		forms = append(forms, f)
	}
	sort.Slice(forms, func(i, j int) bool {
		if len(forms[i]) != len(forms[j]) {
			return len(forms[i]) > len(forms[j])
		}
		return forms[i] < forms[j]
	})
	return forms
}

// base64Fragments returns, for each alignment k (the value starting at
// byte offset ≡ k mod 3 of a longer text), the part of the text's encoding
// that depends only on the value: skip the value's bytes that share a
// 3-byte group with the text before it, keep only complete groups. Any
// base64 encoding of a text containing the value contains one of them.
func base64Fragments(enc *base64.Encoding, v []byte) []string {
	var out []string
	for k := 0; k < 3; k++ {
		skip := (3 - k) % 3
		if skip >= len(v) {
			continue
		}
		t := v[skip:]
		t = t[:len(t)/3*3]
		if f := enc.EncodeToString(t); len(f) >= minBase64Form {
			out = append(out, f)
		}
	}
	return out
}

// jsonForms are the ways encoding/json and other encoders escape v inside
// a JSON string: with and without HTML escaping.
func jsonForms(v string) []string {
	var out []string
	if b, err := json.Marshal(v); err == nil {
		if esc := string(b[1 : len(b)-1]); esc != v {
			out = append(out, esc)
		}
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if e.Encode(v) == nil {
		b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if esc := string(b[1 : len(b)-1]); esc != v {
			out = append(out, esc)
		}
	}
	return out
}
