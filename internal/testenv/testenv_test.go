package testenv

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// Need skips, or fails under AGENTFLOW_REQUIRE_DOCKER=1, and does nothing
// when the prerequisite is there. The child runs of this test binary are
// the tests under judgement.
func TestNeedSkipsOrFails(t *testing.T) {
	switch os.Getenv("TESTENV_CHILD") {
	case "missing":
		Need(t, false, "widget %s missing", "w1")
		t.Log("not reached")
		return
	case "present":
		Need(t, true, "never printed")
		t.Log("went on")
		return
	}
	child := func(mode, require string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNeedSkipsOrFails$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD="+mode, RequireEnv+"="+require)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	tests := []struct {
		name, mode, require string
		wantErr             bool
		want                string
	}{
		{name: "missing skips", mode: "missing", require: "", want: "--- SKIP"},
		{name: "missing fails when required", mode: "missing", require: "1", wantErr: true, want: RequireEnv + "=1 but widget w1 missing"},
		{name: "present goes on", mode: "present", require: "1", want: "went on"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := child(tc.mode, tc.require)
			if tc.wantErr {
				require.Error(t, err, out)
			} else {
				require.NoError(t, err, out)
			}
			require.Contains(t, out, tc.want)
			require.NotContains(t, out, "not reached")
		})
	}
}

func TestFreePortIsInRange(t *testing.T) {
	p := FreePort(t)
	require.Greater(t, p, 0)
	require.Less(t, p, 65536)
}

func TestRepoRootHoldsGoMod(t *testing.T) {
	_, err := os.Stat(RepoRoot(t) + "/go.mod")
	require.NoError(t, err)
}
