package activities

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBudgetFor(t *testing.T) {
	// The recorded workflow histories schedule RunStep with a 30 s step
	// timeout as StartToClose 150s, HeartbeatTimeout 20s: the budget keeps
	// those numbers, so they replay unchanged.
	require.Equal(t, Budget{
		ToolDeadline:   30 * time.Second,
		StartToClose:   150 * time.Second,
		Heartbeat:      20 * time.Second,
		SandboxRuntime: 150 * time.Second,
	}, BudgetFor(30*time.Second))

	for _, timeout := range []time.Duration{time.Second, 10 * time.Minute, 7 * 24 * time.Hour} {
		b := BudgetFor(timeout)
		require.Equal(t, timeout, b.ToolDeadline)
		require.Greater(t, b.StartToClose, b.ToolDeadline, "the attempt must outlast its tool")
		require.Equal(t, b.StartToClose, b.SandboxRuntime, "one margin: the sandbox lives exactly as long as its attempt")
		require.Less(t, b.Heartbeat, b.StartToClose)
		require.Less(t, DefaultHeartbeatInterval*5, b.Heartbeat, "several heartbeats fit in one heartbeat timeout")
	}
}
