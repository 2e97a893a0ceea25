package egressproxy

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	acl "github.com/stripe/smokescreen/pkg/smokescreen/acl/v1"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/egressproxy/wire"
)

// decider is smokescreen's EgressACL for one sandbox: host AND port must
// match a rule (smokescreen's own ACLs know hosts only). A rule with
// headers makes smokescreen terminate TLS and set them (MitmConfig).
type decider struct {
	rules []exechost.EgressRule
}

func newDecider(rules []wire.Rule) *decider {
	d := &decider{}
	for _, r := range rules {
		d.rules = append(d.rules, exechost.EgressRule{Host: r.Host, Port: r.Port, Headers: r.Headers})
	}
	return d
}

// Decide implements acl.Decider.
func (d *decider) Decide(args acl.DecideArgs) (acl.Decision, error) {
	host := strings.TrimSuffix(strings.ToLower(args.Host), ".")
	port := requestPort(args)
	if args.ConnectReq != nil {
		// A request inside a terminated TLS tunnel must go to the tunnel's
		// own host: the headers smokescreen adds are the CONNECT rule's,
		// and must never travel to another (even allowed) host.
		ch, cp := splitHostPort(args.ConnectReq.Host, 443)
		if !strings.EqualFold(ch, host) || cp != port {
			return acl.Decision{Result: acl.Deny, Reason: "request inside the tunnel names another host than the CONNECT"}, nil
		}
	}
	r, ok := exechost.MatchEgress(d.rules, host, port)
	if !ok {
		return acl.Decision{Result: acl.Deny, Reason: "not on the step's egress list"}, nil
	}
	dec := acl.Decision{Result: acl.Allow, Reason: "egress rule " + r.String()}
	if len(r.Headers) > 0 {
		// Headers carry credentials: they are added inside TLS only. A
		// plain http:// request to such a host would go without them, or
		// with them in clear text; it is refused so the tool learns why.
		if args.ConnectReq == nil && (args.Req == nil || args.Req.Method != http.MethodConnect) {
			return acl.Decision{Result: acl.Deny, Reason: "egress rule " + r.String() + " adds headers, which travel over TLS only: use https://"}, nil
		}
		dec.MitmConfig = &acl.MitmConfig{AddHeaders: r.Headers}
	}
	return dec, nil
}

// requestPort is the port a request goes to: the one it names, else the
// CONNECT's, else its scheme's.
func requestPort(args acl.DecideArgs) int {
	if args.Req == nil {
		return 0
	}
	def := 80
	if args.Req.Method == http.MethodConnect || args.ConnectReq != nil || args.Req.URL != nil && args.Req.URL.Scheme == "https" {
		def = 443
	}
	if args.ConnectReq != nil {
		_, def = splitHostPort(args.ConnectReq.Host, 443)
	}
	h := args.Req.Host
	if h == "" && args.Req.URL != nil {
		h = args.Req.URL.Host
	}
	_, p := splitHostPort(h, def)
	return p
}

func splitHostPort(hp string, def int) (string, int) {
	h, p, err := net.SplitHostPort(hp)
	if err != nil {
		return hp, def
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return h, 0
	}
	return h, n
}
