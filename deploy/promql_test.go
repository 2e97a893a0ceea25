package deploy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A small PromQL scanner, enough to find which metrics (and which of
// their labels) an expression reads. Prometheus' own parser
// (github.com/prometheus/prometheus/promql/parser) would pull the whole
// server into go.mod; promtool, built outside the module, is the real
// parser (check rules), and this scanner only has to find names.

// selector is one metric an expression reads and the label names its
// matchers use.
type selector struct {
	Name   string
	Labels []string
}

// keywords are identifiers that are never metric names: binary and set
// operators, modifiers, aggregation operators (which may be followed by
// `by (...)` rather than `(`), and number literals.
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true, "inf": true, "nan": true,
}

// labelLists are the keywords followed by a parenthesised list of label
// names (not an expression).
var labelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// selectors returns the metrics expr reads, in order of appearance.
func selectors(expr string) ([]selector, error) {
	var out []selector
	s := expr
	i := 0
	skipSpace := func(j int) int {
		for j < len(s) && isSpace(s[j]) {
			j++
		}
		return j
	}
	for i < len(s) {
		c := s[i]
		switch {
		case isSpace(c):
			i++
		case c == '#': // comment to the end of the line
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(s, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{': // matchers without a metric name before them
			end, labels, err := matchers(s, i)
			if err != nil {
				return nil, err
			}
			if slices.Contains(labels, "__name__") {
				return nil, fmt.Errorf("offset %d: selecting by __name__ hides the metric name", i)
			}
			i = end
		case c == '[':
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("offset %d: unclosed [", i)
			}
			i += end + 1
		case c == '$': // a Grafana variable: $x, ${x}, $__rate_interval
			i++
			if i < len(s) && s[i] == '{' {
				end := strings.IndexByte(s[i:], '}')
				if end < 0 {
					return nil, fmt.Errorf("offset %d: unclosed ${", i)
				}
				i += end + 1
			}
			for i < len(s) && isIdent(s[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.': // number or duration: 0.95, 5m, 1e3, 0x1f
			for i < len(s) && (isIdent(s[i]) || s[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(s) && isIdent(s[i]) {
				i++
			}
			name := s[start:i]
			next := skipSpace(i)
			switch {
			case labelLists[name]:
				if next < len(s) && s[next] == '(' {
					end := strings.IndexByte(s[next:], ')')
					if end < 0 {
						return nil, fmt.Errorf("offset %d: unclosed %s (", next, name)
					}
					i = next + end + 1
				}
			case keywords[strings.ToLower(name)]:
			case next < len(s) && s[next] == '(': // a function call
			default:
				sel := selector{Name: name}
				if next < len(s) && s[next] == '{' {
					end, labels, err := matchers(s, next)
					if err != nil {
						return nil, err
					}
					sel.Labels = labels
					i = end
				}
				out = append(out, sel)
			}
		default: // operators, parentheses, commas, @
			i++
		}
	}
	return out, nil
}

// skipString returns the offset after the string literal at s[i].
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("offset %d: unterminated string", i)
}

// matchers reads `{label op "value", ...}` at s[i] and returns the offset
// after it and the label names.
func matchers(s string, i int) (int, []string, error) {
	var labels []string
	j := i + 1
	for {
		for j < len(s) && (isSpace(s[j]) || s[j] == ',') {
			j++
		}
		if j >= len(s) {
			return 0, nil, fmt.Errorf("offset %d: unclosed {", i)
		}
		if s[j] == '}' {
			return j + 1, labels, nil
		}
		start := j
		for j < len(s) && isIdent(s[j]) {
			j++
		}
		if start == j {
			return 0, nil, fmt.Errorf("offset %d: want a label name in matchers", j)
		}
		labels = append(labels, s[start:j])
		for j < len(s) && (isSpace(s[j]) || strings.IndexByte("=!~", s[j]) >= 0) {
			j++
		}
		if j >= len(s) || s[j] != '"' && s[j] != '\'' && s[j] != '`' {
			return 0, nil, fmt.Errorf("offset %d: want a quoted label value", j)
		}
		end, err := skipString(s, j)
		if err != nil {
			return 0, nil, err
		}
		j = end
	}
}

func TestSelectors(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want []selector
	}{
		{"bare", "up", []selector{{Name: "up"}}},
		{"matchers", `up{job="agentflow-worker", instance=~"w.*"} == 0`,
			[]selector{{Name: "up", Labels: []string{"job", "instance"}}}},
		{"the seed's alert", `rate(docker_agent_smartagent_total{status="failed"}[1h]) > 0.05`,
			[]selector{{Name: "docker_agent_smartagent_total", Labels: []string{"status"}}}},
		{"aggregation with by before", `sum by (tool, le) (rate(agentflow_step_duration_seconds_bucket{tool=~"$tool"}[$__rate_interval]))`,
			[]selector{{Name: "agentflow_step_duration_seconds_bucket", Labels: []string{"tool"}}}},
		{"aggregation with by after", `sum(rate(a_total[5m])) by (status) / ignoring(status) group_left sum(rate(b_total[5m]))`,
			[]selector{{Name: "a_total"}, {Name: "b_total"}}},
		{"quantile and numbers", `histogram_quantile(0.95, sum by (le) (rate(x_bucket[1h30m]))) > 1e3`,
			[]selector{{Name: "x_bucket"}}},
		{"set operators and recording rules", "sum(increase(a_total[2h])) > 0\n  unless\nsum(increase(b_total[2h])) > 0 or agentflow:ratio:1h",
			[]selector{{Name: "a_total"}, {Name: "b_total"}, {Name: "agentflow:ratio:1h"}}},
		{"strings with braces and quotes", `x{a="}{", b='it\'s', c=~"300(\\.0)?"} offset 5m`,
			[]selector{{Name: "x", Labels: []string{"a", "b", "c"}}}},
		{"absent", `absent(up{job="agentflow-worker"})`, []selector{{Name: "up", Labels: []string{"job"}}}},
		{"topk and bool", `topk(3, y) > bool 2`, []selector{{Name: "y"}}},
		{"space before matchers", `z {a="1"}`, []selector{{Name: "z", Labels: []string{"a"}}}},
		{"grafana braces variable", `w[${__range}]`, []selector{{Name: "w"}}},
		{"comment", "v # not_a_metric\n", []selector{{Name: "v"}}},
		{"no metric", `vector(1)`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := selectors(tc.expr)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestSelectorsRefusesBrokenExpressions(t *testing.T) {
	for _, expr := range []string{`x{a="1"`, `x{a="1}`, `x[5m`, `x{a}`, `x{="1"}`, `{__name__="x"}`, `"open`} {
		t.Run(expr, func(t *testing.T) {
			_, err := selectors(expr)
			require.Error(t, err)
		})
	}
}
