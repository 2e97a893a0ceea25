package spec

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/expr"
)

// Egress limits of a spec (the host-neutral ones are exechost's).
const (
	minEgressBytes = 1 << 10
	maxEgressBytes = 16 << 30
)

// egressFacts is one validated egress list: its rules and the secrets its
// header values reference (first-use order).
type egressFacts struct {
	rules   []EgressRule
	secrets []string
}

// checkEgress validates one egress list at path (steps[i].egress or
// defaults.egress). The host and header rules are exechost's, so what the
// spec accepts every host accepts.
func (v *validator) checkEgress(path string, entries []EgressEntry, secrets map[string]bool) egressFacts {
	var f egressFacts
	if len(entries) > exechost.MaxEgressRules {
		v.errf(path, "more than %d egress entries", exechost.MaxEgressRules)
	}
	seen := map[string]int{}
	for i, en := range entries {
		ep := fmt.Sprintf("%s[%d]", path, i)
		hp := ep + ".host"
		if v.s.bad[ep] {
			continue // reported by the decoder
		}
		rule, ok := v.checkEgressHostPort(hp, en.Host)
		if !ok {
			continue
		}
		if j, dup := seen[rule.Host+":"+strconv.Itoa(rule.Port)]; dup {
			v.errf(hp, "%s:%d is listed twice (first at %s[%d])", rule.Host, rule.Port, path, j)
			continue
		}
		seen[rule.Host+":"+strconv.Itoa(rule.Port)] = i
		if len(en.Headers) > exechost.MaxEgressHeaders {
			v.errf(ep+".headers", "more than %d headers", exechost.MaxEgressHeaders)
		}
		for _, k := range v.s.order[ep+".headers"] {
			kp := childPath(ep+".headers", k)
			if err := exechost.CheckEgressHeaderName(k); err != nil {
				v.errKey(kp, "%v", err)
				continue
			}
			val := en.Headers[k]
			if strings.ContainsAny(val, "\r\n\x00") {
				v.errf(kp, "header %s: the value contains CR, LF or NUL", k)
				continue
			}
			names, err := expr.ParseSecretText(val)
			if err != nil {
				var te *expr.SecretTextError
				if errors.As(err, &te) {
					v.errOffset(kp, te.Offset, "header %s: %s", k, te.Msg)
				} else {
					v.errf(kp, "header %s: %v", k, err)
				}
				continue
			}
			for _, n := range names {
				if !secrets[n] {
					v.errf(kp, "header %s: unknown secret %q (declare it under secrets)", k, n)
					continue
				}
				if !slices.Contains(f.secrets, n) {
					f.secrets = append(f.secrets, n)
				}
			}
			if rule.Headers == nil {
				rule.Headers = map[string]string{}
			}
			rule.Headers[k] = val
		}
		f.rules = append(f.rules, rule)
	}
	return f
}

// checkEgressHostPort splits and checks "host:port".
func (v *validator) checkEgressHostPort(path, s string) (EgressRule, bool) {
	if s == "" {
		v.errf(path, "egress entry needs \"host:port\"")
		return EgressRule{}, false
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		v.errf(path, "egress %q needs a port: write \"%s:443\"", s, s)
		return EgressRule{}, false
	}
	host, portStr := s[:i], s[i+1:]
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		v.errf(path, "egress %q: an IP literal; name the service by its DNS name", s)
		return EgressRule{}, false
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || strings.TrimLeft(portStr, "0123456789") != "" {
		v.errf(path, "egress %q: port %q is not a number", s, portStr)
		return EgressRule{}, false
	}
	if err := exechost.CheckEgressPort(port); err != nil {
		v.errf(path, "egress %q: %v", s, err)
		return EgressRule{}, false
	}
	if err := exechost.CheckEgressHost(host); err != nil {
		v.errf(path, "egress %q: %v", s, err)
		return EgressRule{}, false
	}
	return EgressRule{Host: host, Port: port}, true
}
