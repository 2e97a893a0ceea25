package policy

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
)

// TestPooledSpecDiffersOnlyInIdentity: a warm-pool sandbox's configuration
// is a cold sandbox's for the same request except its name, labels, env
// (which travels with every exec instead) and keeper duration.
func TestPooledSpecDiffersOnlyInIdentity(t *testing.T) {
	p, err := New(Config{})
	require.NoError(t, err)
	cold := exechost.ProvisionRequest{
		ExecutionID: "agent/run/step/1", Image: "sha256:abc",
		Resources: exechost.ResourceLimits{NanoCPUs: 5e8, MemoryBytes: 64 << 20, DiskBytes: 16 << 20, Pids: 32,
			Runtime: 90 * time.Second, MaxOutputBytes: 1 << 20},
		Network:   exechost.NetworkNone,
		Env:       map[string]string{"LOG_LEVEL": "debug"},
		Labels:    map[string]string{"agentflow.test": "1", "agentflow.run_id": "r1"},
		Workspace: exechost.Workspace{Checkpoints: []exechost.CheckpointID{"ck"}},
	}
	meta := Meta{Owner: "me", ImageID: "sha256:abc", Deadline: time.Unix(1000, 0)}
	want := p.Build(cold, meta)

	tmpl := PoolTemplate(cold)
	tmpl.ExecutionID = "pool-0123"
	tmpl.Labels = map[string]string{"agentflow.test": "1"}
	keeper := time.Minute + cold.Resources.Runtime + 5*time.Second
	got := Pooled(p.Build(tmpl, Meta{Owner: "me", ImageID: "sha256:abc", Deadline: time.Unix(2000, 0)}), "k1", keeper)

	require.Equal(t, []string{"sleep", strconv.Itoa(155)}, []string(got.Config.Entrypoint))
	require.Equal(t, "k1", got.Config.Labels[LabelPool])
	require.Equal(t, "pool-0123", got.Config.Labels[LabelExecution])
	require.Equal(t, "2000", got.Config.Labels[LabelDeadline], "the deadline label is the keeper's backstop")
	require.Empty(t, got.Config.Env, "no per-execution env in a pooled sandbox's configuration")
	require.NotContains(t, got.Config.Labels, "agentflow.run_id")

	for _, s := range []*Spec{&want, &got} {
		c := *s.Config
		c.Labels, c.Entrypoint, c.Env = nil, nil, nil
		s.Config, s.Name = &c, ""
	}
	require.Equal(t, want, got)
}

func TestMergeEnv(t *testing.T) {
	tests := []struct {
		name       string
		base, over []string
		want       []string
	}{
		{name: "no base", over: []string{"A=1"}, want: []string{"A=1"}},
		{name: "no over", base: []string{"A=1"}, want: []string{"A=1"}},
		{name: "exec overrides in place", base: []string{"A=1", "B=2"}, over: []string{"B=3", "C=4"}, want: []string{"A=1", "B=3", "C=4"}},
		{name: "value with equals", base: []string{"A=x=y"}, over: []string{"A=z=w"}, want: []string{"A=z=w"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := append([]string(nil), tc.base...)
			require.Equal(t, tc.want, MergeEnv(base, tc.over))
			require.Equal(t, tc.base, base, "base is not modified")
		})
	}
}
