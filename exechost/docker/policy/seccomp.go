package policy

import (
	"bytes"
	_ "embed"
	"encoding/json"
)

// seccompProfile is agentflow's own seccomp profile, applied to every
// sandbox instead of the daemon's default (which, depending on the Docker
// version, allows io_uring, ptrace and process_vm_*). It is moby's default
// profile (github.com/moby/profiles/seccomp v0.1.0, Apache-2.0, vendored in
// testdata) minus the calls listed in seccomp_test.go; see
// docs/security/sandbox-kernel.md.
//
//go:embed seccomp.json
var seccompProfile []byte

// seccompOpt is the SecurityOpt value: the daemon takes the profile's JSON
// inline (what `docker run --security-opt seccomp=FILE` sends).
var seccompOpt = func() string {
	var b bytes.Buffer
	if err := json.Compact(&b, seccompProfile); err != nil {
		panic("policy: embedded seccomp.json: " + err.Error())
	}
	return "seccomp=" + b.String()
}()

// SeccompProfile returns a copy of the profile's JSON.
func SeccompProfile() []byte { return bytes.Clone(seccompProfile) }
