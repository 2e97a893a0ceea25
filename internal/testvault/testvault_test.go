package testvault

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// do sends one request the way Vault's API is documented and decodes the
// JSON answer.
func do(t *testing.T, c *http.Client, method, url, tok, ns string, body any) (int, map[string]any) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	require.NoError(t, err)
	if tok != "" {
		req.Header.Set("X-Vault-Token", tok)
	}
	if ns != "" {
		req.Header.Set("X-Vault-Namespace", ns)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

func TestServerAPI(t *testing.T) {
	s := Start(t, Options{TLS: true})
	pem, err := os.ReadFile(s.CACertFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	s.Put("", "secret", "prod/slack", map[string]any{"webhook": "v1"})
	s.Put("", "secret", "prod/slack", map[string]any{"webhook": "v2"})
	s.AddToken("reader", "", Policy{Read: []string{"secret/data/prod/*"}, Write: []string{"secret/data/prod/new"}})
	s.AddToken("ns-reader", "team-a", Policy{Read: []string{"secret/data/*"}})
	s.Put("team-a", "secret", "x", map[string]any{"k": "in-namespace"})
	get := s.URL + "/v1/secret/data/prod/slack"

	tests := []struct {
		name, method, url, tok, ns string
		body                       any
		status                     int
		check                      func(t *testing.T, out map[string]any)
	}{
		{name: "latest", method: "GET", url: get, tok: "reader", status: 200, check: func(t *testing.T, out map[string]any) {
			d := out["data"].(map[string]any)
			require.Equal(t, "v2", d["data"].(map[string]any)["webhook"])
			require.EqualValues(t, 2, d["metadata"].(map[string]any)["version"])
		}},
		{name: "version 1", method: "GET", url: get + "?version=1", tok: "reader", status: 200, check: func(t *testing.T, out map[string]any) {
			require.Equal(t, "v1", out["data"].(map[string]any)["data"].(map[string]any)["webhook"])
		}},
		{name: "no such version", method: "GET", url: get + "?version=9", tok: "reader", status: 404},
		{name: "no token", method: "GET", url: get, status: 403, check: func(t *testing.T, out map[string]any) {
			require.Equal(t, []any{"permission denied"}, out["errors"])
		}},
		{name: "unknown token", method: "GET", url: get, tok: "nope", status: 403},
		{name: "path not granted", method: "GET", url: s.URL + "/v1/secret/data/admin/x", tok: "reader", status: 403},
		{name: "missing secret", method: "GET", url: s.URL + "/v1/secret/data/prod/none", tok: "reader", status: 404, check: func(t *testing.T, out map[string]any) {
			require.Equal(t, []any{}, out["errors"])
		}},
		{name: "token of another namespace", method: "GET", url: s.URL + "/v1/secret/data/x", tok: "ns-reader", status: 403},
		{name: "namespace", method: "GET", url: s.URL + "/v1/secret/data/x", tok: "ns-reader", ns: "team-a/", status: 200, check: func(t *testing.T, out map[string]any) {
			require.Equal(t, "in-namespace", out["data"].(map[string]any)["data"].(map[string]any)["k"])
		}},
		{name: "traversal", method: "GET", url: s.URL + "/v1/secret/data/prod/%2e%2e/admin", tok: "reader", status: 400},
		{name: "write", method: "POST", url: s.URL + "/v1/secret/data/prod/new", tok: "reader", body: map[string]any{"data": map[string]any{"a": "b"}}, status: 200},
		{name: "write not granted", method: "PUT", url: get, tok: "reader", body: map[string]any{"data": map[string]any{"a": "b"}}, status: 403},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, out := do(t, c, tc.method, tc.url, tc.tok, tc.ns, tc.body)
			require.Equal(t, tc.status, status, "%v", out)
			if tc.check != nil {
				tc.check(t, out)
			}
		})
	}

	t.Run("deleted latest version", func(t *testing.T) {
		s.DeleteLatest("", "secret", "prod/slack")
		status, out := do(t, c, "GET", get, "reader", "", nil)
		require.Equal(t, 404, status)
		d := out["data"].(map[string]any)
		require.Nil(t, d["data"])
		require.NotEmpty(t, d["metadata"].(map[string]any)["deletion_time"])
	})

	t.Run("approle login", func(t *testing.T) {
		s.AddAppRole("", "role-1", "secret-1", Policy{Read: []string{"secret/data/prod/*"}})
		status, _ := do(t, c, "POST", s.URL+"/v1/auth/approle/login", "", "", map[string]any{"role_id": "role-1", "secret_id": "wrong"})
		require.Equal(t, 400, status)
		status, out := do(t, c, "PUT", s.URL+"/v1/auth/approle/login", "", "", map[string]any{"role_id": "role-1", "secret_id": "secret-1"})
		require.Equal(t, 200, status)
		tok := out["auth"].(map[string]any)["client_token"].(string)
		require.Equal(t, []string{tok}, s.IssuedTokens())
		status, _ = do(t, c, "GET", get+"?version=1", tok, "", nil)
		require.Equal(t, 200, status)
	})

	t.Run("faults", func(t *testing.T) {
		s.FailWith(503)
		status, out := do(t, c, "GET", get, "reader", "", nil)
		require.Equal(t, 503, status)
		require.NotEmpty(t, out["errors"])
		s.FailWith(0)
	})

	require.Contains(t, s.TokensSeen(), "reader")
	require.Contains(t, s.TokensSeen(), "ns-reader")
	reqs := s.Requests()
	require.Equal(t, "/v1/secret/data/prod/slack", reqs[0].Path)
	require.Equal(t, "team-a", reqs[8].Namespace)
}
