//go:build integration

package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/testenv"
)

// promtool runs Prometheus' promtool (built by scripts/test-servers.sh,
// outside the module) and returns its combined output and error.
func promtool(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The shipped rules parse (promtool is the real PromQL parser), the
// example configuration loads them, and every alert's unit tests pass:
// series that fire each alert and series that do not.
func TestPromtool(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"check rules", []string{"check", "rules", "prometheus/alerts.yml"}, "SUCCESS"},
		{"check config", []string{"check", "config", "prometheus/prometheus.yml"}, "SUCCESS"},
		{"test rules", []string{"test", "rules", "prometheus/alerts_test.yml"}, "SUCCESS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := promtool(t, ".", tc.args...)
			require.NoError(t, err, out)
			require.Contains(t, out, tc.want)
		})
	}
}

// The checks can fail: a broken expression fails check rules, and an
// alert that no longer fires as its test expects fails test rules.
func TestPromtoolCatchesBrokenRules(t *testing.T) {
	rules, err := os.ReadFile("prometheus/alerts.yml")
	require.NoError(t, err)
	tests, err := os.ReadFile("prometheus/alerts_test.yml")
	require.NoError(t, err)

	cases := []struct {
		name   string
		mutate func(rules string) string
		args   []string
		want   string
	}{
		{
			name: "unparsable expression",
			mutate: func(r string) string {
				return strings.Replace(r, "agentflow:run_failure_ratio:1h > 0.05", "agentflow:run_failure_ratio:1h > > 0.05", 1)
			},
			args: []string{"check", "rules", "alerts.yml"},
			want: "parse error",
		},
		{
			name: "threshold that no longer fires",
			mutate: func(r string) string {
				return strings.Replace(r, "agentflow:run_failure_ratio:1h > 0.05", "agentflow:run_failure_ratio:1h > 0.5", 1)
			},
			args: []string{"test", "rules", "alerts_test.yml"},
			want: "AgentflowRunFailureRateHigh",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mutated := tc.mutate(string(rules))
			require.NotEqual(t, string(rules), mutated, "the mutation must change the rules")
			require.NoError(t, os.WriteFile(filepath.Join(dir, "alerts.yml"), []byte(mutated), 0o600))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "alerts_test.yml"), tests, 0o600))
			out, err := promtool(t, dir, tc.args...)
			require.Error(t, err, out)
			require.Contains(t, out, tc.want)
		})
	}
}
