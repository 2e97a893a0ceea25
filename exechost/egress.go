package exechost

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// NetworkEgress is a sandbox whose only way out is the host's egress
// boundary: a proxy that lets through exactly the request's Egress rules.
// The sandbox has no route and no DNS of its own; HTTP_PROXY and
// HTTPS_PROXY (and their lower-case forms) name the proxy.
const NetworkEgress NetworkMode = "egress"

// Egress bounds. A host may lower them, never raise them.
const (
	MaxEgressRules         = 64
	MaxEgressHeaders       = 16 // per rule
	MaxEgressHeaderBytes   = 8 << 10
	DefaultEgressBytes     = 64 << 20 // resources.max_egress when a spec says nothing
	DefaultEgressConns     = 256      // connections per sandbox
	MaxEgressHostBytes     = 253
	egressWildcardPrefix   = "*."
	egressHeaderNameTokens = "!#$%&'*+-.^_`|~"
)

// EgressRule lets a sandbox reach one host (or, with a leading "*.", every
// name under one domain, not the domain itself) on one port.
type EgressRule struct {
	// Host is a lower-case DNS name, optionally "*." + name. Never an IP
	// literal: an allow-list of addresses would let a spec author name the
	// worker's neighbours directly.
	Host string `json:"host"`
	Port int    `json:"port"`
	// Headers are set on every request to this host (replacing what the
	// tool sent). Their values are final (secrets substituted by the
	// caller): the host hands them to its boundary only, never to the
	// sandbox, its configuration, its logs or a checkpoint. A rule with
	// headers makes the boundary terminate TLS for that host with a CA
	// of its own that the sandbox trusts, and verify the upstream itself.
	Headers map[string]string `json:"headers,omitempty"`
}

// String is "host:port".
func (r EgressRule) String() string { return r.Host + ":" + strconv.Itoa(r.Port) }

// EgressPolicy is what a NetworkEgress sandbox may reach.
type EgressPolicy struct {
	Rules []EgressRule
	// MaxBytes bounds the bytes through the boundary in both directions
	// over the sandbox's life; a connection that crosses it is cut.
	MaxBytes int64
	// MaxConnections bounds the connections over the sandbox's life
	// (0: DefaultEgressConns).
	MaxConnections int
	// Events, when set, receives one event per connection attempt after
	// the connection ended (or was refused). It must not block for long;
	// the host calls it from its own goroutine, never after Terminate
	// returned.
	Events func(EgressEvent)
}

// EgressEvent is one connection through (or refused at) the boundary. It
// never carries a header value.
type EgressEvent struct {
	Time     time.Time     `json:"time"`
	Host     string        `json:"host"` // as the tool asked for it
	Port     int           `json:"port"`
	Kind     string        `json:"kind"` // "connect" (CONNECT tunnel), "http" (forward proxy), "mitm" (terminated TLS, headers added)
	Allowed  bool          `json:"allowed"`
	Reason   string        `json:"reason"`         // why refused, or which rule allowed it
	Address  string        `json:"addr,omitempty"` // the address the boundary connected to
	BytesOut int64         `json:"bytes_out"`      // tool → upstream
	BytesIn  int64         `json:"bytes_in"`       // upstream → tool
	Duration time.Duration `json:"duration"`
}

// CheckEgressHost checks one allow-list host: a DNS name of letters,
// digits and '-' labels (lower case), at most one leading "*." wildcard,
// at least two labels below a wildcard, no IP literal, no bare "*".
func CheckEgressHost(host string) error {
	name, wild := strings.CutPrefix(host, egressWildcardPrefix)
	switch {
	case host == "":
		return fmt.Errorf("empty host")
	case host == "*" || name == "*" || strings.Contains(name, "*"):
		return fmt.Errorf("host %q: only a leading \"*.\" wildcard is allowed", host)
	case len(host) > MaxEgressHostBytes:
		return fmt.Errorf("host %q: longer than %d bytes", host, MaxEgressHostBytes)
	case strings.HasPrefix(host, "[") || isIPLiteral(name):
		return fmt.Errorf("host %q: an IP literal; name the service by its DNS name", host)
	case strings.HasSuffix(name, "."):
		return fmt.Errorf("host %q: no trailing dot", host)
	}
	labels := strings.Split(name, ".")
	if wild && len(labels) < 2 {
		return fmt.Errorf("host %q: a wildcard needs a domain of at least two labels (*.example.com)", host)
	}
	for _, l := range labels {
		if err := checkDNSLabel(l); err != nil {
			return fmt.Errorf("host %q: %v", host, err)
		}
	}
	// A numeric top label is how inet_aton spells addresses ("10.1",
	// "0x7f.1"); no real TLD is numeric.
	if top := labels[len(labels)-1]; strings.Trim(top, "0123456789") == "" || strings.HasPrefix(top, "0x") {
		return fmt.Errorf("host %q: looks like an address, not a DNS name", host)
	}
	return nil
}

func isIPLiteral(s string) bool {
	_, err := netip.ParseAddr(strings.Trim(s, "[]"))
	return err == nil
}

func checkDNSLabel(l string) error {
	switch {
	case l == "":
		return fmt.Errorf("empty label")
	case len(l) > 63:
		return fmt.Errorf("label %q longer than 63 bytes", l)
	case l[0] == '-' || l[len(l)-1] == '-':
		return fmt.Errorf("label %q starts or ends with '-'", l)
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			if c >= 'A' && c <= 'Z' {
				return fmt.Errorf("label %q: write host names in lower case", l)
			}
			return fmt.Errorf("label %q: only a-z, 0-9 and '-' are allowed", l)
		}
	}
	return nil
}

// CheckEgressPort checks an allow-list port (1-65535).
func CheckEgressPort(port int) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("port %d out of range 1-65535", port)
	}
	return nil
}

// reservedEgressHeaders are headers the boundary owns or that change how a
// request is framed or routed; a rule may not set them.
var reservedEgressHeaders = map[string]bool{
	"host": true, "connection": true, "content-length": true, "transfer-encoding": true,
	"te": true, "trailer": true, "upgrade": true, "keep-alive": true,
	"proxy-authorization": true, "proxy-authenticate": true, "proxy-connection": true,
	"x-smokescreen-role": true, "x-smokescreen-trace-id": true, "x-upstream-https-proxy": true,
}

// CheckEgressHeaderName checks the name of a header a rule sets: an HTTP
// token that is not hop-by-hop, framing or the boundary's own.
func CheckEgressHeaderName(name string) error {
	if name == "" {
		return fmt.Errorf("empty header name")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(egressHeaderNameTokens, c) >= 0) {
			return fmt.Errorf("header name %q: not an HTTP token", name)
		}
	}
	if reservedEgressHeaders[strings.ToLower(name)] {
		return fmt.Errorf("header %q is set by the egress boundary or frames the request; it cannot be injected", name)
	}
	return nil
}

// CheckEgressHeaderValue checks a final header value (no CR, LF or NUL:
// they would split the request).
func CheckEgressHeaderValue(v string) error {
	if strings.ContainsAny(v, "\r\n\x00") {
		return fmt.Errorf("header value contains CR, LF or NUL")
	}
	if len(v) > MaxEgressHeaderBytes {
		return fmt.Errorf("header value longer than %d bytes", MaxEgressHeaderBytes)
	}
	return nil
}

// MatchEgress returns the rule that allows host:port, or false. A wildcard
// rule "*.example.com" matches "a.example.com" and "a.b.example.com", not
// "example.com". host is compared in lower case without a trailing dot.
// When several rules match, an exact one wins over a wildcard.
func MatchEgress(rules []EgressRule, host string, port int) (EgressRule, bool) {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	var wild *EgressRule
	for i, r := range rules {
		if r.Port != port {
			continue
		}
		if r.Host == host {
			return r, true
		}
		if d, ok := strings.CutPrefix(r.Host, egressWildcardPrefix); ok && wild == nil &&
			strings.HasSuffix(host, "."+d) && len(host) > len(d)+1 {
			wild = &rules[i]
		}
	}
	if wild != nil {
		return *wild, true
	}
	return EgressRule{}, false
}

func checkEgress(ps *problems, network NetworkMode, eg *EgressPolicy) {
	switch {
	case network == NetworkEgress && eg == nil:
		ps.add("egress", "network %q needs an egress policy", NetworkEgress)
		return
	case network != NetworkEgress && eg != nil:
		ps.add("egress", "an egress policy needs network %q", NetworkEgress)
		return
	case eg == nil:
		return
	}
	if len(eg.Rules) == 0 {
		ps.add("egress.rules", "empty: a sandbox with egress reaches at least one host")
	}
	if len(eg.Rules) > MaxEgressRules {
		ps.add("egress.rules", "more than %d", MaxEgressRules)
	}
	seen := map[string]bool{}
	for i, r := range eg.Rules {
		f := fmt.Sprintf("egress.rules[%d]", i)
		if err := CheckEgressHost(r.Host); err != nil {
			ps.add(f+".host", "%v", err)
		}
		if err := CheckEgressPort(r.Port); err != nil {
			ps.add(f+".port", "%v", err)
		}
		if seen[r.String()] {
			ps.add(f, "%s listed twice", r)
		}
		seen[r.String()] = true
		if len(r.Headers) > MaxEgressHeaders {
			ps.add(f+".headers", "more than %d", MaxEgressHeaders)
		}
		for k, v := range r.Headers {
			if err := CheckEgressHeaderName(k); err != nil {
				ps.add(f+".headers", "%v", err)
			}
			if err := CheckEgressHeaderValue(v); err != nil {
				ps.add(f+".headers."+k, "%v", err) // never the value
			}
		}
	}
	if eg.MaxBytes <= 0 {
		ps.add("egress.max_bytes", "required")
	}
	if eg.MaxConnections < 0 {
		ps.add("egress.max_connections", "negative")
	}
}
