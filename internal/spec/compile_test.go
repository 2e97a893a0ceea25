package spec

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCompileGivesEveryToolStepATimeout: the compiled Plan is authoritative
// for the time budget (the workflow fails a Plan whose tool step has none,
// RunStep refuses such a request), so compile must fill in every tool
// step's timeout: the step's own, else defaults.timeout, else
// DefaultTimeout (SPEC: 10m). Approval steps run no sandbox and get none.
func TestCompileGivesEveryToolStepATimeout(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want map[string]time.Duration
	}{
		{
			name: "built-in default",
			src:  "name: t\nversion: \"1.0.0\"\nsteps: [{id: a, tool: 'x:1'}, {id: b, image: 'sha256:" + hex64 + "'}]\n",
			want: map[string]time.Duration{"a": DefaultTimeout, "b": DefaultTimeout},
		},
		{
			name: "spec default and step override",
			src:  "name: t\nversion: \"1.0.0\"\ndefaults: {timeout: 90s}\nsteps: [{id: a, tool: 'x:1'}, {id: b, tool: 'x:1', timeout: 2d}]\n",
			want: map[string]time.Duration{"a": 90 * time.Second, "b": 48 * time.Hour},
		},
		{
			name: "approval gets none",
			src:  "name: t\nversion: \"1.0.0\"\nsteps: [{id: a, tool: 'x:1', timeout: 5s}, {id: g, approval: {prompt: 'ok?'}, depends_on: [a]}]\n",
			want: map[string]time.Duration{"a": 5 * time.Second, "g": 0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Load("t.yaml", []byte(tc.src))
			require.NoError(t, err)
			got := map[string]time.Duration{}
			for _, st := range p.Steps {
				got[st.ID] = st.Timeout
			}
			require.Equal(t, tc.want, got)
		})
	}

	files, err := filepath.Glob("../../specs/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		p, err := LoadFile(f)
		require.NoError(t, err, f)
		for _, st := range p.Steps {
			if st.Approval == nil {
				require.Positive(t, st.Timeout, "%s: step %s", f, st.ID)
			}
		}
	}
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
