package codecserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentflow/agentflow/internal/keyfile"
	"github.com/agentflow/agentflow/internal/payloadcodec"
)

const (
	uiOrigin = "http://127.0.0.1:8233"
	token    = "s3cr3t-token-0123456789"
	marker   = "refund-for-order-77a1"
)

func testCodec(t *testing.T) *payloadcodec.Codec {
	t.Helper()
	c, err := payloadcodec.New(keyfile.Key{ID: "k1", Secret: bytes.Repeat([]byte{1}, payloadcodec.KeyBytes)})
	require.NoError(t, err)
	return c
}

// encryptedBody is what the Web UI posts to /decode: the payloads of a
// history event as protobuf JSON, here one encrypted by the real codec.
func encryptedBody(t *testing.T, c *payloadcodec.Codec) []byte {
	t.Helper()
	p, err := c.DataConverter().ToPayload(map[string]string{"email": marker})
	require.NoError(t, err)
	b, err := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{p}})
	require.NoError(t, err)
	require.NotContains(t, string(b), marker)
	return b
}

func TestHandler(t *testing.T) {
	codec := testCodec(t)
	body := encryptedBody(t, codec)
	plain, err := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte("json/plain")},
		Data:     []byte(`"` + marker + `"`),
	}}})
	require.NoError(t, err)

	type req struct {
		method  string
		path    string
		origin  string
		auth    string
		headers map[string]string
		body    []byte
	}
	tests := []struct {
		name       string
		token      string // the server's
		req        req
		status     int
		allowed    string // Access-Control-Allow-Origin wanted ("" = none)
		wantMarker bool   // the response holds the decrypted marker
		check      func(t *testing.T, res *http.Response, body []byte)
	}{
		{
			name: "decode with the token", token: token,
			req:    req{method: "POST", path: "/decode", auth: "Bearer " + token, body: body},
			status: 200, wantMarker: true,
		},
		{
			name: "bearer scheme is case-insensitive", token: token,
			req:    req{method: "POST", path: "/decode", auth: "bearer " + token, body: body},
			status: 200, wantMarker: true,
		},
		{
			name: "no token", token: token,
			req:    req{method: "POST", path: "/decode", body: body},
			status: 401,
			check: func(t *testing.T, res *http.Response, _ []byte) {
				require.Contains(t, res.Header.Get("WWW-Authenticate"), "Bearer")
			},
		},
		{
			name: "wrong token", token: token,
			req:    req{method: "POST", path: "/decode", auth: "Bearer " + token + "x", body: body},
			status: 401,
		},
		{
			name: "token in another scheme", token: token,
			req:    req{method: "POST", path: "/decode", auth: "Basic " + token, body: body},
			status: 401,
		},
		{
			name: "no auth configured (loopback, for the Web UI)",
			req:  req{method: "POST", path: "/decode", body: body}, status: 200, wantMarker: true,
		},
		{
			name: "browser POST from the UI origin", token: token,
			req:    req{method: "POST", path: "/decode", origin: uiOrigin, auth: "Bearer " + token, body: body, headers: map[string]string{"X-Namespace": "default"}},
			status: 200, allowed: uiOrigin, wantMarker: true,
		},
		{
			name:   "browser POST from another origin",
			req:    req{method: "POST", path: "/decode", origin: "http://evil.example", body: body},
			status: 403,
		},
		{
			name: "origin differing only by port", token: token,
			req:    req{method: "POST", path: "/decode", origin: "http://127.0.0.1:8234", auth: "Bearer " + token, body: body},
			status: 403,
		},
		{
			name: "preflight from the UI origin needs no token", token: token,
			req: req{method: "OPTIONS", path: "/decode", origin: uiOrigin, headers: map[string]string{
				"Access-Control-Request-Method":  "POST",
				"Access-Control-Request-Headers": "content-type,x-namespace",
			}},
			status: 204, allowed: uiOrigin,
			check: func(t *testing.T, res *http.Response, _ []byte) {
				h := res.Header.Get("Access-Control-Allow-Headers")
				for _, want := range []string{"Authorization", "Content-Type", "X-Namespace"} {
					require.Contains(t, h, want)
				}
				require.Contains(t, res.Header.Get("Access-Control-Allow-Methods"), "POST")
				require.Contains(t, res.Header.Values("Vary"), "Origin")
			},
		},
		{
			name: "preflight from another origin",
			req:  req{method: "OPTIONS", path: "/decode", origin: "http://evil.example"}, status: 403,
		},
		{
			name: "encode round trip", token: token,
			req:    req{method: "POST", path: "/encode", auth: "Bearer " + token, body: plain},
			status: 200,
			check: func(t *testing.T, _ *http.Response, b []byte) {
				require.NotContains(t, string(b), marker, "encode returns ciphertext")
				var ps commonpb.Payloads
				require.NoError(t, protojson.Unmarshal(b, &ps))
				dec, err := codec.Decode(ps.Payloads)
				require.NoError(t, err)
				require.Contains(t, string(dec[0].Data), marker)
			},
		},
		{
			name: "tampered payload", token: token,
			req:    req{method: "POST", path: "/decode", auth: "Bearer " + token, body: bytes.Replace(body, []byte(`"data":"`), []byte(`"data":"AAAA`), 1)},
			status: 400,
		},
		{name: "GET", req: req{method: "GET", path: "/decode"}, status: 405},
		{name: "other path", req: req{method: "POST", path: "/x/decode", body: body}, status: 404},
		{name: "root", req: req{method: "POST", path: "/", body: body}, status: 404},
		{
			name: "oversized body",
			req:  req{method: "POST", path: "/decode", body: bytes.Repeat([]byte(" "), MaxBody+1)}, status: 400,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(Handler(Options{Codec: codec, Token: tt.token, UIOrigin: uiOrigin}))
			defer srv.Close()
			r, err := http.NewRequestWithContext(t.Context(), tt.req.method, srv.URL+tt.req.path, bytes.NewReader(tt.req.body))
			require.NoError(t, err)
			r.Header.Set("Content-Type", "application/json")
			if tt.req.origin != "" {
				r.Header.Set("Origin", tt.req.origin)
			}
			if tt.req.auth != "" {
				r.Header.Set("Authorization", tt.req.auth)
			}
			for k, v := range tt.req.headers {
				r.Header.Set(k, v)
			}
			res, err := http.DefaultClient.Do(r)
			require.NoError(t, err)
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			require.NoError(t, err)
			require.Equal(t, tt.status, res.StatusCode, "body: %s", b)
			require.Equal(t, tt.allowed, res.Header.Get("Access-Control-Allow-Origin"))
			if tt.wantMarker {
				var ps commonpb.Payloads
				require.NoError(t, protojson.Unmarshal(b, &ps))
				require.Len(t, ps.Payloads, 1)
				require.Equal(t, "json/plain", string(ps.Payloads[0].Metadata[converter.MetadataEncoding]))
				var v map[string]string
				require.NoError(t, json.Unmarshal(ps.Payloads[0].Data, &v))
				require.Equal(t, marker, v["email"])
			} else {
				require.NotContains(t, string(b), marker)
			}
			if tt.check != nil {
				tt.check(t, res, b)
			}
		})
	}
}

func TestCheckListen(t *testing.T) {
	tests := []struct {
		addr     string
		insecure bool
		ok       bool
	}{
		{addr: "127.0.0.1:8081", insecure: true, ok: true},
		{addr: "[::1]:8081", insecure: true, ok: true},
		{addr: "localhost:8081", insecure: true, ok: true},
		{addr: "127.0.0.2:0", insecure: true, ok: true},
		{addr: ":8081", insecure: true},
		{addr: "0.0.0.0:8081", insecure: true},
		{addr: "10.0.0.5:8081", insecure: true},
		{addr: "[::]:8081", insecure: true},
		{addr: "codec.example:8081", insecure: true},
		{addr: "0.0.0.0:8081", ok: true},
		{addr: ":8081", ok: true},
		{addr: "no-port"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			err := CheckListen(tt.addr, tt.insecure)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			if tt.addr != "no-port" {
				require.ErrorIs(t, err, ErrNeedsAuth)
			}
		})
	}
}

func TestCheckOrigin(t *testing.T) {
	for _, ok := range []string{"http://localhost:8233", "https://temporal.example.com", "http://127.0.0.1:8233", "http://[::1]:8233"} {
		require.NoError(t, CheckOrigin(ok), ok)
	}
	for _, bad := range []string{"localhost:8233", "http://localhost:8233/", "http://localhost:8233/namespaces", "ftp://x", "http://", "*", "http://u@host", "http://h?x=1"} {
		require.Error(t, CheckOrigin(bad), bad)
	}
}

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	got, err := ReadToken(write("good", "  "+token+"\n", 0o600))
	require.NoError(t, err)
	require.Equal(t, token, got)

	tests := []struct {
		name, content string
		mode          os.FileMode
		want          string
	}{
		{name: "group readable", content: token, mode: 0o640, want: "mode 0640"},
		{name: "short", content: "abc\n", mode: 0o600, want: "shorter than 16"},
		{name: "two lines", content: token + "\n" + token + "\n", mode: 0o600, want: "one line"},
		{name: "huge", content: strings.Repeat("a", maxToken+1), mode: 0o600, want: "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadToken(write(strings.ReplaceAll(tt.name, " ", "-"), tt.content, tt.mode))
			require.ErrorContains(t, err, tt.want)
			require.NotContains(t, err.Error(), token, "the token never appears in an error")
		})
	}
}
