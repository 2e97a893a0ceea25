package worker

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseEgressAllowCIDR(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "10.0.0.0/8", want: "10.0.0.0/8"},
		{in: "172.18.0.5/16", want: "172.18.0.0/16"},
		{in: "fd00::/8", want: "fd00::/8"},
		{in: " 192.168.1.0/24 ", want: "192.168.1.0/24"},
		{in: "0.0.0.0/0", err: "whole address space"},
		{in: "::/0", err: "whole address space"},
		{in: "127.0.0.1/32", err: "127.0.0.0/8"},
		{in: "169.254.0.0/24", err: "169.254.0.0/16"},
		{in: "128.0.0.0/1", err: "169.254.0.0/16"},
		{in: "230.0.0.0/8", err: "224.0.0.0/4"},
		{in: "0.0.0.0/1", err: "0.0.0.0/8"},
		{in: "fe80::/64", err: "fe80::/10"},
		{in: "::/1", err: "::1/128"},
		{in: "10.0.0.0", err: "no '/'"},
	} {
		p, err := ParseEgressAllowCIDR(tc.in)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, netip.MustParsePrefix(tc.want), p)
	}
}

func TestParseEgressResolve(t *testing.T) {
	name, addr, err := ParseEgressResolve("techcrunch.com=172.18.0.2")
	require.NoError(t, err)
	require.Equal(t, "techcrunch.com", name)
	require.Equal(t, "172.18.0.2", addr)
	_, addr, err = ParseEgressResolve("api.example.com=::ffff:10.0.0.1")
	require.NoError(t, err)
	require.Equal(t, "::ffff:10.0.0.1", addr)
	for _, bad := range []string{"", "x", "=1.2.3.4", "Api.Example.com=1.2.3.4", "*.a.com=1.2.3.4", "a.com=", "a.com=host", "1.2.3.4=1.2.3.4"} {
		_, _, err := ParseEgressResolve(bad)
		require.Error(t, err, bad)
	}
}
