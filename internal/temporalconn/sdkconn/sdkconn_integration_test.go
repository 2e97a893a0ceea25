//go:build integration

package sdkconn

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/devserver"
	"github.com/agentflow/agentflow/internal/temporalconn"
	"github.com/agentflow/agentflow/internal/testenv"
)

// TestMutualTLSToARealServer: a real Temporal server behind mutual TLS
// (the dev server, its frontend reached only through a TLS terminator that
// requires a client certificate from the test CA): the right CA and
// certificate connect; a wrong CA, no client certificate, or plaintext are
// refused, and the explanation names TLS.
func TestMutualTLSToARealServer(t *testing.T) {
	srv, err := devserver.Start(t.Context(), devserver.Options{Bin: testenv.TemporalBinary(t), Port: testenv.FreePort(t), Headless: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop(15 * time.Second) })
	pki := testenv.NewPKI(t, "temporal.test")
	front := testenv.TLSFront(t, srv.Address, pki, true)

	dial := func(s temporalconn.Security) error {
		o := client.Options{HostPort: front, Namespace: "default"}
		if err := Apply(s, &o); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		c, err := client.DialContext(ctx, o)
		if err != nil {
			return s.Explain(err)
		}
		defer c.Close()
		_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
		return s.Explain(err)
	}
	good := temporalconn.Security{CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey, ServerName: "temporal.test"}
	require.NoError(t, dial(good))

	for name, tc := range map[string]struct {
		s    temporalconn.Security
		want string
	}{
		"wrong CA":          {temporalconn.Security{CAFile: pki.OtherCAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey, ServerName: "temporal.test"}, "TLS"},
		"no client cert":    {temporalconn.Security{CAFile: pki.CAFile, ServerName: "temporal.test"}, "TLS"},
		"wrong server name": {temporalconn.Security{CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey, ServerName: "other.test"}, "TLS"},
		"plaintext":         {temporalconn.Security{}, "--tls"},
	} {
		t.Run(name, func(t *testing.T) {
			err := dial(tc.s)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}
