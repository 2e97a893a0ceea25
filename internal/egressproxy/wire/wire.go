// Package wire is the contract between a sandbox host and the egress proxy
// it starts next to a NetworkEgress sandbox (cmd/agentflow-egress-proxy,
// package internal/egressproxy): the configuration the host writes to the
// proxy's stdin, once, and the records the proxy writes to its stdout, one
// JSON object per line. It holds types only, so the host links no proxy
// code.
//
// The configuration travels on stdin, never in the container's
// configuration, labels or environment, because it holds header values
// (secrets) and the per-sandbox CA's private key: docker inspect shows
// neither, and nothing of it is on disk.
package wire

import "time"

// Version is the configuration and record schema; the proxy refuses any
// other.
const Version = 1

// ListenPort is the proxy's port on the sandbox's network.
const ListenPort = 3128

// Config is everything one proxy instance needs. It ends with the
// first JSON value on stdin.
type Config struct {
	Version int `json:"version"`
	// Listen is "ip:port" on the sandbox's own (internal) network: the
	// proxy listens there only, so no other container on the egress
	// network can use it.
	Listen string `json:"listen"`
	Rules  []Rule `json:"rules"`
	// MaxBytes bounds bytes through the proxy, both directions, over its
	// life; MaxConnections the connections (allowed or not).
	MaxBytes       int64 `json:"max_bytes"`
	MaxConnections int   `json:"max_connections"`
	// AllowCIDRs are private ranges the operator allows (worker
	// --egress-allow-cidr). Loopback, link-local, multicast, unspecified
	// and DenyAddrs are refused whatever they say.
	AllowCIDRs []string `json:"allow_cidrs,omitempty"`
	// DenyAddrs are addresses refused always: the Docker host's own
	// (gateways of the egress network), the proxy's own.
	DenyAddrs []string `json:"deny_addrs,omitempty"`
	// Resolve overrides DNS for names (test-only: worker --egress-resolve
	// name=ip). The resolved address is still checked like any other.
	Resolve map[string]string `json:"resolve,omitempty"`
	// CACertPEM and CAKeyPEM are the per-sandbox CA the proxy signs leaf
	// certificates with when it terminates TLS (rules with headers only).
	// Empty when no rule has headers.
	CACertPEM string `json:"ca_cert_pem,omitempty"`
	CAKeyPEM  string `json:"ca_key_pem,omitempty"`
	// UpstreamRootsPEM are the roots the proxy verifies upstreams against
	// when it terminates TLS (the worker's system roots plus
	// --egress-ca-file).
	UpstreamRootsPEM string `json:"upstream_roots_pem,omitempty"`
	// Deadline is when the proxy exits whatever happens (the sandbox's).
	Deadline time.Time `json:"deadline"`
}

// Rule is one allow-list entry.
type Rule struct {
	Host    string            `json:"host"` // DNS name or "*." + name
	Port    int               `json:"port"`
	Headers map[string]string `json:"headers,omitempty"`
}

// Record is one line on the proxy's stdout.
type Record struct {
	// Type is "ready" (listening; first line), "conn" (one connection
	// ended or was refused) or "fatal" (the proxy is exiting: Reason).
	Type     string    `json:"type"`
	Time     time.Time `json:"time"`
	Host     string    `json:"host,omitempty"`
	Port     int       `json:"port,omitempty"`
	Kind     string    `json:"kind,omitempty"` // connect, http, mitm
	Allowed  bool      `json:"allowed"`
	Reason   string    `json:"reason,omitempty"`
	Address  string    `json:"addr,omitempty"`
	BytesOut int64     `json:"bytes_out,omitempty"`
	BytesIn  int64     `json:"bytes_in,omitempty"`
	// DurationMS is how long the connection lasted.
	DurationMS int64 `json:"duration_ms,omitempty"`
}
