package docker

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOwnerLiveness(t *testing.T) {
	me := DefaultOwner()
	host, _ := os.Hostname()
	require.Regexp(t, `^.+:\d+:\d*:[0-9a-f]{8}$`, me)
	require.True(t, LocalOwnerAlive(me), "this process is alive")
	other := DefaultOwner()
	require.NotEqual(t, me, other, "two hosts in one process have distinct owners")
	require.True(t, LocalOwnerAlive(other), "and each sees the other as alive")

	tests := []struct {
		owner string
		alive bool
	}{
		{fmt.Sprintf("%s:%d:1", host, os.Getpid()), false}, // our PID, another start time: a previous process
		{fmt.Sprintf("%s:%d:1:0badcafe", host, os.Getpid()), false},
		{fmt.Sprintf("%s:%d:1", host, 1<<22+7), false}, // no such PID
		{"another-host:1:1", true},                     // cannot tell: leave it to its deadline
		{"not-our-format", true},
	}
	for _, tt := range tests {
		require.Equal(t, tt.alive, LocalOwnerAlive(tt.owner), tt.owner)
	}
}

func TestParseOOMKills(t *testing.T) {
	v1 := "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
	v2 := "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\n"
	n, ok := parseOOMKills(v1)
	require.True(t, ok)
	require.EqualValues(t, 3, n)
	n, ok = parseOOMKills(v2)
	require.True(t, ok)
	require.EqualValues(t, 2, n)
	_, ok = parseOOMKills("cat: can't open")
	require.False(t, ok)
}
