package payloadcodec

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/keyfile"
)

const marker = "customer-email-4f1d@example.com"

func key(id string, b byte) keyfile.Key {
	return keyfile.Key{ID: id, Secret: bytes.Repeat([]byte{b}, KeyBytes)}
}

func mustNew(t *testing.T, keys ...keyfile.Key) *Codec {
	t.Helper()
	c, err := New(keys...)
	require.NoError(t, err)
	return c
}

func TestRoundTrip(t *testing.T) {
	c := mustNew(t, key("k1", 1))
	dc := c.DataConverter()
	tests := []struct {
		name  string
		value any
		into  func() any
	}{
		{name: "string", value: marker, into: func() any { return new(string) }},
		{name: "map", value: map[string]any{"email": marker, "n": 3.0}, into: func() any { return &map[string]any{} }},
		{name: "bytes", value: []byte(marker), into: func() any { return new([]byte) }},
		{name: "nil", value: nil, into: func() any { return new(any) }},
		{name: "empty string", value: "", into: func() any { return new(string) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := dc.ToPayload(tt.value)
			require.NoError(t, err)
			require.Equal(t, EncodingEncrypted, string(p.Metadata[converter.MetadataEncoding]))
			require.Equal(t, "k1", string(p.Metadata[MetadataKeyID]))
			raw, err := proto.Marshal(p)
			require.NoError(t, err)
			require.NotContains(t, string(raw), marker, "no plaintext in the encoded payload")
			require.NotContains(t, string(raw), "json/plain", "the inner metadata is encrypted too")

			got := tt.into()
			require.NoError(t, dc.FromPayload(p, got))
			if tt.value == nil {
				require.Nil(t, *(got.(*any)))
				return
			}
			require.Equal(t, tt.value, deref(got))
		})
	}

	t.Run("fresh nonce each time", func(t *testing.T) {
		a, err := dc.ToPayload(marker)
		require.NoError(t, err)
		b, err := dc.ToPayload(marker)
		require.NoError(t, err)
		require.NotEqual(t, a.Data, b.Data)
	})
	t.Run("payloads in clear pass through", func(t *testing.T) {
		plain, err := converter.GetDefaultDataConverter().ToPayload(marker)
		require.NoError(t, err)
		var s string
		require.NoError(t, dc.FromPayload(plain, &s))
		require.Equal(t, marker, s)
	})
}

func deref(v any) any {
	switch p := v.(type) {
	case *string:
		return *p
	case *map[string]any:
		return *p
	case *[]byte:
		return *p
	}
	panic(fmt.Sprintf("unexpected %T", v))
}

func TestRotation(t *testing.T) {
	old := mustNew(t, key("2026-01", 1))
	rotated := mustNew(t, key("2026-12", 2), key("2026-01", 1))
	require.Equal(t, "2026-12", rotated.ActiveKeyID())

	oldPayload, err := old.DataConverter().ToPayload(marker)
	require.NoError(t, err)
	var s string
	require.NoError(t, rotated.DataConverter().FromPayload(oldPayload, &s), "a payload of the old key still decodes")
	require.Equal(t, marker, s)

	newPayload, err := rotated.DataConverter().ToPayload(marker)
	require.NoError(t, err)
	require.Equal(t, "2026-12", string(newPayload.Metadata[MetadataKeyID]), "the first key encrypts")
	var ue *UnknownKeyError
	require.ErrorAs(t, old.DataConverter().FromPayload(newPayload, &s), &ue, "a ring without the new key cannot read it")
}

func TestDecodeRefuses(t *testing.T) {
	c := mustNew(t, key("a", 1), key("b", 2))
	enc := func(t *testing.T) *commonpb.Payload {
		p, err := c.DataConverter().ToPayload(marker)
		require.NoError(t, err)
		return p
	}
	tests := []struct {
		name    string
		mutate  func(p *commonpb.Payload)
		codec   *Codec
		is      error
		unknown string // the id an UnknownKeyError names
	}{
		{name: "flipped ciphertext byte", mutate: func(p *commonpb.Payload) { p.Data[len(p.Data)/2] ^= 1 }, is: ErrDecrypt},
		{name: "flipped nonce byte", mutate: func(p *commonpb.Payload) { p.Data[0] ^= 1 }, is: ErrDecrypt},
		{name: "flipped tag byte", mutate: func(p *commonpb.Payload) { p.Data[len(p.Data)-1] ^= 1 }, is: ErrDecrypt},
		{name: "truncated", mutate: func(p *commonpb.Payload) { p.Data = p.Data[:10] }, is: ErrDecrypt},
		{name: "empty data", mutate: func(p *commonpb.Payload) { p.Data = nil }, is: ErrDecrypt},
		{name: "relabelled with another key of the ring", mutate: func(p *commonpb.Payload) { p.Metadata[MetadataKeyID] = []byte("b") }, is: ErrDecrypt},
		{name: "no key id", mutate: func(p *commonpb.Payload) { delete(p.Metadata, MetadataKeyID) }, is: ErrDecrypt},
		{name: "unknown key id", mutate: func(p *commonpb.Payload) { p.Metadata[MetadataKeyID] = []byte("gone-2025") }, unknown: "gone-2025"},
		{name: "same id, other secret", codec: mustNew(t, key("a", 9)), is: ErrDecrypt},
		{name: "ring without the key", codec: mustNew(t, key("b", 2)), unknown: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := enc(t)
			if tt.mutate != nil {
				tt.mutate(p)
			}
			dec := c
			if tt.codec != nil {
				dec = tt.codec
			}
			var s string
			err := dec.DataConverter().FromPayload(p, &s)
			require.Error(t, err)
			require.Empty(t, s)
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
			if tt.unknown != "" {
				var ue *UnknownKeyError
				require.ErrorAs(t, err, &ue)
				require.Equal(t, tt.unknown, ue.ID)
				require.Contains(t, err.Error(), `"`+tt.unknown+`"`, "the error names the id")
			}
		})
	}
}

func TestFailureConverterEncryptsMessages(t *testing.T) {
	c := mustNew(t, key("k1", 1))
	fc := FailureConverter(c.DataConverter())
	cause := errors.New("cause: " + marker)
	err := temporal.NewApplicationErrorWithCause("step failed: "+marker, "ToolFailed", cause, marker+"-detail")

	f := fc.ErrorToFailure(err)
	raw, merr := proto.Marshal(f)
	require.NoError(t, merr)
	require.NotContains(t, string(raw), marker, "no message, cause or detail in clear")
	require.NotContains(t, string(raw), "step failed")
	require.NotNil(t, f.GetEncodedAttributes())
	require.Equal(t, "ToolFailed", f.GetApplicationFailureInfo().GetType(), "the type stays visible")

	back := fc.FailureToError(f)
	require.Contains(t, back.Error(), "step failed: "+marker)
	var ae *temporal.ApplicationError
	require.ErrorAs(t, back, &ae)
	var detail string
	require.NoError(t, ae.Details(&detail))
	require.Equal(t, marker+"-detail", detail)
	require.Contains(t, errors.Unwrap(back).Error(), marker)
}

func TestApply(t *testing.T) {
	var opts client.Options
	(*Codec)(nil).Apply(&opts)
	require.Nil(t, opts.DataConverter, "no codec: payloads stay in clear")
	require.Nil(t, opts.FailureConverter)

	mustNew(t, key("k1", 1)).Apply(&opts)
	require.NotNil(t, opts.DataConverter)
	require.NotNil(t, opts.FailureConverter, "data and failure converter are set together")
	p, err := opts.DataConverter.ToPayload(marker)
	require.NoError(t, err)
	require.Equal(t, EncodingEncrypted, string(p.Metadata[converter.MetadataEncoding]))
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	b64 := func(b byte, n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, n)) }
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}

	c, err := Load(write("good", "# codec keys, newest first\nnew "+b64(2, 32)+"\nold "+b64(1, 32)+"\n", 0o600))
	require.NoError(t, err)
	require.Equal(t, "new", c.ActiveKeyID())

	tests := []struct {
		name string
		body string
		mode os.FileMode
		want string
	}{
		{name: "group readable", body: "k " + b64(1, 32) + "\n", mode: 0o640, want: "mode 0640, want 0600"},
		{name: "world readable", body: "k " + b64(1, 32) + "\n", mode: 0o644, want: "mode 0644"},
		{name: "16-byte key", body: "k " + b64(1, 32) + "\nshort " + b64(1, 16) + "\n", mode: 0o600, want: `:2: key "short": key is 16 bytes, want 32`},
		{name: "48-byte key", body: "long " + b64(1, 48) + "\n", mode: 0o600, want: `:1: key "long": key is 48 bytes`},
		{name: "not base64", body: "\n\nk not-base64!\n", mode: 0o600, want: `:3: secret of key "k" is not base64`},
		{name: "duplicate id", body: "k " + b64(1, 32) + "\nk " + b64(2, 32) + "\n", mode: 0o600, want: `:2: key id "k" already on line 1`},
		{name: "no key", body: "# empty\n", mode: 0o600, want: "no key"},
		{name: "one field", body: "k\n", mode: 0o600, want: `:1: want "<key-id> <base64 secret>"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := write(strings.ReplaceAll(tt.name, " ", "-"), tt.body, tt.mode)
			_, err := Load(p)
			require.Error(t, err)
			require.Contains(t, err.Error(), "codec key file")
			require.Contains(t, err.Error(), p, "the error names the file")
			require.Contains(t, err.Error(), tt.want)
			require.NotContains(t, err.Error(), b64(1, 32))
		})
	}
	_, err = Load(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name string
		keys []keyfile.Key
	}{
		{name: "no key"},
		{name: "bad id", keys: []keyfile.Key{key("a b", 1)}},
		{name: "duplicate", keys: []keyfile.Key{key("a", 1), key("a", 2)}},
		{name: "short", keys: []keyfile.Key{{ID: "a", Secret: []byte("short")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.keys...)
			require.Error(t, err)
		})
	}
}
