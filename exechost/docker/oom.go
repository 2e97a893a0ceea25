package docker

import (
	"strconv"
	"strings"
)

// parseOOMKills finds the "oom_kill N" counter in cgroup v1
// memory.oom_control or cgroup v2 memory.events output.
func parseOOMKills(s string) (int64, bool) {
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "oom_kill" {
			n, err := strconv.ParseInt(f[1], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
