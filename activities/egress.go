package activities

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/expr"
	"github.com/agentflow/agentflow/internal/metrics"
)

// maxEgressLogLines bounds the connections a step's log lists; the rest
// are counted in one line (metrics count them all).
const maxEgressLogLines = 1000

// egressPolicy is the sandbox's egress policy for a step with egress
// rules, or nil (network none) for one without. Header values are the
// one place secrets are substituted into text; they go to the host's
// boundary only, never to the tool's input or environment. A header that
// cannot be built is InvalidInput naming the header, never a value.
func (at *attempt) egressPolicy(values map[string]string) (*exechost.EgressPolicy, error) {
	req := at.req
	if len(req.Egress) == 0 {
		return nil, nil
	}
	pol := &exechost.EgressPolicy{MaxBytes: req.Resources.MaxEgressBytes, Events: at.egress.add}
	if pol.MaxBytes <= 0 {
		pol.MaxBytes = exechost.DefaultEgressBytes
	}
	for _, r := range req.Egress {
		rule := exechost.EgressRule{Host: r.Host, Port: r.Port}
		for name, tmpl := range r.Headers {
			v, err := expr.SubstituteSecretText(tmpl, values)
			if err != nil {
				return nil, failf(ErrTypeInvalidInput, "egress %s:%d of step %s: header %s: %v", r.Host, r.Port, req.StepID, name, err)
			}
			if err := exechost.CheckEgressHeaderValue(v); err != nil {
				return nil, failf(ErrTypeInvalidInput, "egress %s:%d of step %s: header %s: %v", r.Host, r.Port, req.StepID, name, err)
			}
			if rule.Headers == nil {
				rule.Headers = map[string]string{}
			}
			rule.Headers[name] = v
		}
		pol.Rules = append(pol.Rules, rule)
	}
	return pol, nil
}

// egressLog collects a sandbox's egress events (the host delivers them
// from its own goroutine, never after Terminate returned) for the step's
// log, and counts each in the metrics as it arrives.
type egressLog struct {
	metrics *metrics.Metrics
	tool    string

	mu      sync.Mutex
	events  []exechost.EgressEvent
	dropped int
}

func (l *egressLog) add(ev exechost.EgressEvent) {
	l.metrics.ObserveEgress(l.tool, ev.Allowed, ev.BytesOut, ev.BytesIn)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) >= maxEgressLogLines {
		l.dropped++
		return
	}
	l.events = append(l.events, ev)
}

// lines are the log lines of the connections so far, one each:
//
//	--- agentflow: egress connect techcrunch.com:443 allowed (egress rule techcrunch.com:443) → 172.18.0.5:443, 1234 B out, 48213 B in, 120 ms
//	--- agentflow: egress http evil.example:80 refused: not on the step's egress list
//
// Hosts and reasons come from the tool's requests: control characters are
// dropped so a tool cannot forge log lines through them.
func (l *egressLog) lines() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, ev := range l.events {
		target := fmt.Sprintf("%s:%d", printable(ev.Host, 253), ev.Port)
		if !ev.Allowed {
			fmt.Fprintf(&b, "--- agentflow: egress %s %s refused: %s\n", printable(ev.Kind, 16), target, printable(ev.Reason, 300))
			continue
		}
		fmt.Fprintf(&b, "--- agentflow: egress %s %s allowed", printable(ev.Kind, 16), target)
		if ev.Reason != "" && ev.Reason != "allowed" {
			fmt.Fprintf(&b, " (%s)", printable(ev.Reason, 300))
		}
		if ev.Address != "" {
			fmt.Fprintf(&b, " → %s", printable(ev.Address, 64))
		}
		fmt.Fprintf(&b, ", %d B out, %d B in, %d ms\n", ev.BytesOut, ev.BytesIn, ev.Duration.Round(time.Millisecond).Milliseconds())
	}
	if l.dropped > 0 {
		fmt.Fprintf(&b, "--- agentflow: egress: %d more connections not listed\n", l.dropped)
	}
	return b.String()
}

// printable drops control characters and cuts s to n bytes.
func printable(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		s = truncate(s, n) + "…"
	}
	return s
}
