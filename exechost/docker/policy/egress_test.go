package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
)

// TestEgressProxyIsHardened: the proxy container gets what a sandbox gets
// (read-only rootfs, no capabilities, no-new-privileges, our seccomp
// profile, a numeric non-root user, bounded memory/PIDs/CPU, no logs,
// auto-remove) and carries no configuration of its own: rules, header
// values and the CA key arrive on stdin only.
func TestEgressProxyIsHardened(t *testing.T) {
	p := newPolicy(t, Config{})
	labels := EgressLabels(validRequest(), Meta{Owner: "w", Deadline: time.Unix(100, 0)}, RoleEgressProxy)
	s := p.EgressProxy("sha256:"+strings.Repeat("a", 64), "bridge", labels)
	hc, cfg := s.HostConfig, s.Config
	require.True(t, hc.ReadonlyRootfs)
	require.True(t, hc.AutoRemove)
	require.Equal(t, []string{"ALL"}, []string(hc.CapDrop))
	require.Empty(t, hc.CapAdd)
	require.False(t, hc.Privileged)
	require.Contains(t, hc.SecurityOpt, "no-new-privileges")
	require.Contains(t, hc.SecurityOpt, seccompOpt)
	require.Equal(t, ProxyUser, cfg.User)
	require.NotEqual(t, "0", strings.Split(cfg.User, ":")[0])
	require.Positive(t, hc.Memory)
	require.Equal(t, hc.Memory, hc.MemorySwap)
	require.NotNil(t, hc.PidsLimit)
	require.Positive(t, *hc.PidsLimit)
	require.Positive(t, hc.NanoCPUs)
	require.Equal(t, "none", hc.LogConfig.Type)
	require.Equal(t, "bridge", string(hc.NetworkMode))
	require.Empty(t, cfg.Env, "the proxy's configuration is never in its environment")
	require.Empty(t, cfg.Cmd)
	require.True(t, cfg.OpenStdin && cfg.StdinOnce, "configuration arrives on stdin, once")
	require.Equal(t, RoleEgressProxy, cfg.Labels[LabelRole])
	require.Equal(t, "true", cfg.Labels[LabelManaged])
	require.Equal(t, "100", cfg.Labels[LabelDeadline])
	require.Equal(t, string(validRequest().ExecutionID), cfg.Labels[LabelExecution])
}

// TestEgressNetworkHasNoWayOut: internal, no masquerading, no address of
// the host on the bridge, IPv4 only.
func TestEgressNetworkHasNoWayOut(t *testing.T) {
	n := EgressNetwork(map[string]string{LabelManaged: "true"})
	require.True(t, n.Internal)
	require.NotNil(t, n.EnableIPv6)
	require.False(t, *n.EnableIPv6)
	require.Equal(t, "true", n.Options["com.docker.network.bridge.inhibit_ipv4"])
	require.Equal(t, "false", n.Options["com.docker.network.bridge.enable_ip_masquerade"])
	require.Equal(t, "true", n.Labels[LabelManaged])
}

// TestWithEgress: the sandbox joins its own network, the spec's proxy
// variables are dropped (ProxyEnv sets them per exec, last, so they win),
// its resolver answers nothing, and the CA variables name the bundle on
// /tmp only when there is one.
func TestWithEgress(t *testing.T) {
	p := newPolicy(t, Config{})
	req := validRequest()
	req.Env = map[string]string{"HTTPS_PROXY": "http://evil:1", "no_proxy": "*", "KEEP": "1"}
	for _, withCA := range []bool{false, true} {
		s := WithEgress(p.Build(req, Meta{ImageID: testImageID}), "net-x", withCA)
		require.Equal(t, "net-x", string(s.HostConfig.NetworkMode))
		require.False(t, s.Config.NetworkDisabled)
		require.Equal(t, []string{"127.0.0.1"}, s.HostConfig.DNS)
		env := map[string]string{}
		for _, kv := range s.Config.Env {
			k, v, _ := strings.Cut(kv, "=")
			_, dup := env[k]
			require.False(t, dup, "%s set twice", k)
			env[k] = v
		}
		require.NotContains(t, env, "HTTPS_PROXY")
		require.NotContains(t, env, "no_proxy")
		require.Equal(t, "1", env["KEEP"])
		if withCA {
			require.Equal(t, CABundlePath, env["SSL_CERT_FILE"])
			require.True(t, strings.HasPrefix(CABundlePath, TmpDir+"/"), "the bundle is on the tmpfs, never checkpointed")
		} else {
			require.NotContains(t, env, "SSL_CERT_FILE")
		}
	}
	pe := map[string]string{}
	for _, kv := range ProxyEnv("10.0.0.2") {
		k, v, _ := strings.Cut(kv, "=")
		pe[k] = v
	}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
		require.Equal(t, "http://10.0.0.2:3128", pe[k], k)
	}
	require.Contains(t, pe, "NO_PROXY")
	require.Empty(t, pe["NO_PROXY"])
	// The request's network none sandbox is untouched by Build.
	require.True(t, p.Build(req, Meta{ImageID: testImageID}).Config.NetworkDisabled)
	require.Equal(t, string(exechost.NetworkNone), string(p.Build(req, Meta{ImageID: testImageID}).HostConfig.NetworkMode))
}

func TestEgressNamesAreDistinct(t *testing.T) {
	id := exechost.ExecutionID("af-0123456789abcdef")
	names := []string{ContainerName(id), EgressProxyName(id), EgressNetworkName(id)}
	require.Len(t, map[string]bool{names[0]: true, names[1]: true, names[2]: true}, 3)
	require.NotEqual(t, EgressProxyName(id), EgressProxyName("af-0123456789abcdeg"))
}
