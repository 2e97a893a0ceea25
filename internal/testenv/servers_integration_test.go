//go:build integration

package testenv_test

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/testenv"
)

// TestMinIOStopStart: the outage helpers really take the server away and
// bring it back on the same address with the same data.
func TestMinIOStopStart(t *testing.T) {
	m := testenv.MinIO(t)
	c := m.Client(t)
	ok, err := c.BucketExists(t.Context(), m.Bucket)
	require.NoError(t, err)
	require.True(t, ok)
	m.Stop()
	_, err = http.Get(m.Endpoint + "/minio/health/live")
	require.Error(t, err, "stopped means nothing listens")
	m.Stop() // idempotent
	m.Start()
	ok, err = c.BucketExists(t.Context(), m.Bucket)
	require.NoError(t, err)
	require.True(t, ok, "same data directory after a restart")
}

func TestRegistry(t *testing.T) {
	r := testenv.Registry(t)
	resp, err := http.Get("http://" + r.Addr + "/v2/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "registry/2.0", resp.Header.Get("Docker-Distribution-Api-Version"))
	r.Stop()
	_, err = http.Get("http://" + r.Addr + "/v2/")
	require.Error(t, err)
}

func TestRegistryWithAuth(t *testing.T) {
	r := testenv.RegistryWith(t, testenv.RegistryOptions{WithAuth: true})
	get := func(user, password string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+r.Addr+"/v2/", nil)
		require.NoError(t, err)
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, get("", ""))
	require.Equal(t, http.StatusUnauthorized, get(testenv.RegistryUser, "wrong"))
	require.Equal(t, http.StatusOK, get(testenv.RegistryUser, testenv.RegistryPassword))
}

// Postgres starts PostgreSQL from Debian's packages (as the postgres user
// under root) and it accepts connections on its port until the test ends.
func TestPostgres(t *testing.T) {
	pg := testenv.Postgres(t)
	c, err := net.DialTimeout("tcp", pg.Addr, 5*time.Second)
	require.NoError(t, err)
	c.Close()
}
