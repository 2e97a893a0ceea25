package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/egressproxy/wire"
)

// The egress boundary's pure configuration: the sandbox's own network,
// the proxy container, and what changes in a sandbox with egress. The
// lifecycle is exechost/docker/egress.go.

// LabelRole tells the parts of one execution apart: the sandbox (no
// label), its egress proxy and its network.
const (
	LabelRole         = "agentflow.role"
	RoleEgressProxy   = "egress-proxy"
	RoleEgressNetwork = "egress-network"
)

// ProxyUser is the proxy's numeric uid:gid (its image's too).
const ProxyUser = "65530:65530"

// CABundlePath is where a sandbox with a terminating rule finds the CAs it
// trusts (its /tmp is a tmpfs: nothing of it is checkpointed).
const CABundlePath = TmpDir + "/agentflow-egress-ca.pem"

// caEnv are the variables common TLS stacks read a CA bundle from.
var caEnv = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"}

// proxyEnv are the variables that make clients use the proxy.
var proxyEnv = []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"}

// EgressNetworkName is the name of an execution's own network.
func EgressNetworkName(id exechost.ExecutionID) string {
	return ContainerName(id) + "-net"
}

// EgressProxyName is the name of an execution's proxy container.
func EgressProxyName(id exechost.ExecutionID) string {
	return ContainerName(id) + "-proxy"
}

// EgressNetwork is the create configuration of an execution's network:
// internal (no route out, no NAT), IPv4 only, and no address of the host
// on it (inhibit_ipv4), so a sandbox cannot reach the Docker host's own
// services either.
func EgressNetwork(labels map[string]string) network.CreateOptions {
	no := false
	return network.CreateOptions{
		Driver:     "bridge",
		Internal:   true,
		EnableIPv6: &no,
		Labels:     labels,
		Options: map[string]string{
			"com.docker.network.bridge.inhibit_ipv4":         "true",
			"com.docker.network.bridge.enable_ip_masquerade": "false",
			"com.docker.network.bridge.enable_icc":           "true",
			"com.docker.network.container_iface_prefix":      "egress",
			"com.docker.network.bridge.gateway_mode_ipv4":    "isolated",
			"com.docker.network.bridge.default_bridge":       "false",
		},
	}
}

// EgressLabels are the labels of an execution's proxy and network: the
// sandbox's ownership labels plus the role.
func EgressLabels(req exechost.ProvisionRequest, meta Meta, role string) map[string]string {
	l := OwnershipLabels(req, meta)
	l[LabelRole] = role
	return l
}

// EgressProxy is the proxy container: hardened like a sandbox (read-only
// rootfs, no capabilities, no-new-privileges, our seccomp profile, a
// non-root uid, bounded memory, PIDs and CPU, no logs, auto-removed),
// started on the worker's egress network; its configuration arrives on
// stdin, never in this configuration.
func (p *Policy) EgressProxy(image, egressNetwork string, labels map[string]string) Spec {
	pids := int64(64)
	mem := int64(64 << 20)
	return Spec{
		Name: "",
		Config: &container.Config{
			Hostname:     "egress",
			User:         ProxyUser,
			Image:        image,
			Labels:       labels,
			OpenStdin:    true,
			StdinOnce:    true,
			AttachStdin:  true,
			AttachStdout: true,
			AttachStderr: true,
			Volumes:      map[string]struct{}{},
		},
		HostConfig: &container.HostConfig{
			AutoRemove:     true,
			NetworkMode:    container.NetworkMode(egressNetwork),
			ReadonlyRootfs: true,
			SecurityOpt:    []string{"no-new-privileges", seccompOpt},
			CapDrop:        []string{"ALL"},
			IpcMode:        container.IPCModePrivate,
			LogConfig:      container.LogConfig{Type: "none"},
			Tmpfs:          map[string]string{TmpDir: "rw,noexec,nosuid,nodev,size=1m,mode=1777"},
			Resources: container.Resources{
				NanoCPUs:   500_000_000,
				Memory:     mem,
				MemorySwap: mem,
				PidsLimit:  &pids,
				Ulimits:    []*container.Ulimit{{Name: "core", Soft: 0, Hard: 0}},
			},
		},
		Network: &network.NetworkingConfig{},
	}
}

// WithEgress turns a sandbox spec (policy.Build) into one on its own
// network: network mode, no resolver that answers (names resolve in the
// proxy only), no proxy variables of the spec's own (ProxyEnv sets them
// on every exec, once the proxy's address is known), and the CA
// variables when the sandbox gets a bundle.
func WithEgress(s Spec, networkName string, withCA bool) Spec {
	s.Config.NetworkDisabled = false
	s.HostConfig.NetworkMode = container.NetworkMode(networkName)
	// The embedded resolver forwards nothing: its only upstream is the
	// sandbox's own loopback, where nothing listens.
	s.HostConfig.DNS = []string{"127.0.0.1"}
	s.HostConfig.DNSSearch = []string{"."}
	set := map[string]string{}
	if withCA {
		for _, k := range caEnv {
			set[k] = CABundlePath
		}
	}
	env := s.Config.Env[:0:0]
	for _, kv := range s.Config.Env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ours := set[k]; !ours && !isProxyVar(k) {
			env = append(env, kv)
		}
	}
	for _, k := range sortedKeys(set) {
		env = append(env, k+"="+set[k])
	}
	s.Config.Env = env
	return s
}

// ProxyEnv are the variables that make clients use the proxy at proxyIP,
// added last to every exec's environment (so they win over the spec's).
func ProxyEnv(proxyIP string) []string {
	url := fmt.Sprintf("http://%s:%d", proxyIP, wire.ListenPort)
	env := make([]string, 0, len(proxyEnv)+2)
	for _, k := range proxyEnv {
		env = append(env, k+"="+url)
	}
	return append(env, "NO_PROXY=", "no_proxy=")
}

func isProxyVar(k string) bool {
	return slices.Contains(proxyEnv, k) || k == "NO_PROXY" || k == "no_proxy"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
