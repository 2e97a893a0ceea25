package worker

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost/docker"
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

// egressDaemon is the part of a daemon egressOptions asks: an image
// table and a runtime table.
type egressDaemon struct {
	client.ImageAPIClient                   // nil: only ImageInspect is called
	images                map[string]string // reference → ID
	info                  system.Info
	infoCalls             int
}

func (d *egressDaemon) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (image.InspectResponse, error) {
	id, ok := d.images[ref]
	if !ok {
		return image.InspectResponse{}, errdefs.NotFound(errors.New("No such image: " + ref))
	}
	return image.InspectResponse{ID: id}, nil
}

func (d *egressDaemon) Info(context.Context) (system.Info, error) {
	d.infoCalls++
	return d.info, nil
}

// TestEgressOptions: the flags become the Docker host's options; a worker
// that serves no egress says why in Unavailable, which is the reason a
// step with egress fails with (a policy error naming the image or the
// flag), and never resolves a proxy image.
func TestEgressOptions(t *testing.T) {
	const proxyID = "sha256:ab0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab"
	log := slog.New(slog.DiscardHandler)
	daemon := func() *egressDaemon {
		return &egressDaemon{images: map[string]string{DefaultEgressProxyImage: proxyID},
			info: system.Info{DefaultRuntime: "runc", Runtimes: map[string]system.RuntimeWithStatus{"runc": {}}}}
	}

	t.Run("defaults", func(t *testing.T) {
		d := daemon()
		cidr := netip.MustParsePrefix("10.0.0.0/8")
		opts, err := egressOptions(t.Context(), d, EgressConfig{AllowCIDRs: []netip.Prefix{cidr}, Resolve: map[string]string{"a.example.com": "10.0.0.2"}, MaxConnections: 7}, "", log)
		require.NoError(t, err)
		require.Equal(t, proxyID, opts.ProxyImage, "resolved to its ID")
		require.Equal(t, docker.DefaultEgressNetwork, opts.Network)
		require.Equal(t, []netip.Prefix{cidr}, opts.AllowCIDRs)
		require.Equal(t, map[string]string{"a.example.com": "10.0.0.2"}, opts.Resolve)
		require.Equal(t, 7, opts.MaxConnections)
		require.Empty(t, opts.Unavailable)
		require.Equal(t, 1, d.infoCalls)
	})

	t.Run("disabled", func(t *testing.T) {
		d := daemon()
		opts, err := egressOptions(t.Context(), d, EgressConfig{Disabled: true}, "", log)
		require.NoError(t, err)
		require.Empty(t, opts.ProxyImage)
		require.Contains(t, opts.Unavailable, "--egress=false")
		require.Zero(t, d.infoCalls)
	})

	t.Run("proxy image missing", func(t *testing.T) {
		d := daemon()
		opts, err := egressOptions(t.Context(), d, EgressConfig{ProxyImage: "example/proxy:dev"}, "", log)
		require.NoError(t, err, "the worker starts and serves every other step")
		require.Empty(t, opts.ProxyImage)
		require.Contains(t, opts.Unavailable, "example/proxy:dev")
		require.Contains(t, opts.Unavailable, "make images")
	})

	t.Run("CA file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "ca.pem")
		require.NoError(t, os.WriteFile(path, []byte("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n"), 0o600))
		opts, err := egressOptions(t.Context(), daemon(), EgressConfig{CAFile: path}, "", log)
		require.NoError(t, err)
		require.Contains(t, string(opts.ExtraRootsPEM), "BEGIN CERTIFICATE")
	})

	t.Run("runtime without networking", func(t *testing.T) {
		d := daemon()
		d.info.Runtimes["runsc"] = system.RuntimeWithStatus{Runtime: system.Runtime{Path: "runsc", Args: []string{"--network=none"}}}
		opts, err := egressOptions(t.Context(), d, EgressConfig{}, "runsc", log)
		require.NoError(t, err)
		require.Contains(t, opts.Unavailable, "runsc")
	})
}
