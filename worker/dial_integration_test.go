//go:build integration

package worker

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/devserver"
	"github.com/agentflow/agentflow/internal/metrics"
	"github.com/agentflow/agentflow/internal/temporalconn"
	"github.com/agentflow/agentflow/internal/testenv"
	"github.com/agentflow/agentflow/internal/tracing"
)

// TestDialOverMutualTLS: the worker reaches a real server behind mutual
// TLS with the right CA and certificate; with a wrong CA it gives up at
// once, naming TLS, although it keeps retrying an unreachable server for
// DialTimeout (here far longer than the test); without a certificate it
// fails naming TLS.
func TestDialOverMutualTLS(t *testing.T) {
	srv, err := devserver.Start(t.Context(), devserver.Options{Bin: testenv.TemporalBinary(t), Port: testenv.FreePort(t), Headless: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop(15 * time.Second) })
	pki := testenv.NewPKI(t, "temporal.test")
	front := testenv.TLSFront(t, srv.Address, pki, true)
	cfg := func(s temporalconn.Security) Config {
		return Config{Address: front, Namespace: "default", Security: s, DialTimeout: time.Hour,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	}

	c, err := dial(t.Context(), cfg(temporalconn.Security{CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey,
		ServerName: "temporal.test"}), metrics.New(), tracing.Off(), nil)
	require.NoError(t, err)
	c.Close()

	t.Run("wrong CA", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		_, err := dial(ctx, cfg(temporalconn.Security{CAFile: pki.OtherCAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey,
			ServerName: "temporal.test"}), metrics.New(), tracing.Off(), nil)
		require.ErrorContains(t, err, "TLS")
		require.NoError(t, ctx.Err(), "gave up at once instead of retrying for DialTimeout")
	})
	t.Run("no client cert", func(t *testing.T) {
		// Under TLS 1.3 the refusal may arrive as the server hanging up,
		// which the worker retries like a server still starting; the
		// final error still names TLS.
		c := cfg(temporalconn.Security{CAFile: pki.CAFile, ServerName: "temporal.test"})
		c.DialTimeout = 3 * time.Second
		_, err := dial(t.Context(), c, metrics.New(), tracing.Off(), nil)
		require.ErrorContains(t, err, "TLS")
	})
}
