package worker

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost/docker"
)

// TestEgressLookup: the preflight resolves egress hosts as the proxy
// would: overrides first, then DNS; a worker without egress says why.
func TestEgressLookup(t *testing.T) {
	dns := func(_ context.Context, _, host string) ([]netip.Addr, error) {
		switch host {
		case "api.example.com":
			return []netip.Addr{netip.MustParseAddr("203.0.113.9")}, nil
		case "flaky.example.com":
			return nil, &net.DNSError{Err: "i/o timeout", Name: host, IsTimeout: true}
		case "empty.example.com":
			return nil, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	tests := []struct {
		name    string
		opts    docker.EgressOptions
		host    string
		want    string
		wantErr string
	}{
		{name: "override wins over DNS", opts: docker.EgressOptions{Resolve: map[string]string{"api.example.com": "192.0.2.1"}}, host: "api.example.com", want: "192.0.2.1"},
		{name: "DNS", host: "api.example.com", want: "203.0.113.9"},
		{name: "no such host", host: "nope.example.com", wantErr: "nope.example.com does not resolve on this worker (no such host)"},
		{name: "DNS failure", host: "flaky.example.com", wantErr: "resolve flaky.example.com on this worker"},
		{name: "no address", host: "empty.example.com", wantErr: "resolves to no address"},
		{name: "egress unavailable", opts: docker.EgressOptions{Unavailable: egressDisabledReason}, host: "api.example.com", wantErr: "this worker serves no egress"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newEgressLookup(tc.opts)
			l.dns = dns
			addrs, err := l.LookupHost(t.Context(), tc.host)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, []netip.Addr{netip.MustParseAddr(tc.want)}, addrs)
		})
	}
	require.ErrorContains(t, func() error {
		_, err := configEgressLookup(EgressConfig{Disabled: true}).LookupHost(t.Context(), "x.example.com")
		return err
	}(), "--egress=false")
}
