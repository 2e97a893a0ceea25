package docker

import "runtime"

// isAMD64: the seccomp probe is hand-assembled x86-64 (a worker on another
// architecture falls back to checking that a filter is installed).
var isAMD64 = runtime.GOARCH == "amd64"
