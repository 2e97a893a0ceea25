package policy

import (
	"slices"
	"strconv"
	"time"

	"github.com/agentflow/agentflow/exechost"
)

// PoolTemplate is the part of a request a warm-pool sandbox is built from:
// everything that goes into the container configuration except what
// differs per execution (ID, name, env, labels, workspace). Two requests
// with equal templates and image get identical container configuration
// apart from Pooled's changes (TestPooledSpecDiffersOnlyInIdentity).
func PoolTemplate(req exechost.ProvisionRequest) exechost.ProvisionRequest {
	return exechost.ProvisionRequest{Image: req.Image, Resources: req.Resources, Network: exechost.NetworkNone}
}

// Pooled turns the Build of a PoolTemplate into the configuration of a
// warm-pool sandbox: the keeper sleeps keeper (the pool's idle limit plus
// the runtime, so the sandbox has its whole runtime left whenever it is
// taken), and LabelPool carries the pool key. spec was built with the
// pool slot as execution ID and the pool's static labels. Nothing else
// changes: a tool cannot tell a pooled sandbox's limits, rootfs, mounts,
// user or network from a cold one's.
func Pooled(spec Spec, key string, keeper time.Duration) Spec {
	cfg := *spec.Config
	cfg.Labels = make(map[string]string, len(spec.Config.Labels)+1)
	for k, v := range spec.Config.Labels {
		cfg.Labels[k] = v
	}
	cfg.Labels[LabelPool] = key
	cfg.Entrypoint = []string{"sleep", strconv.FormatInt(RuntimeSeconds(keeper), 10)}
	cfg.Env = slices.Clone(spec.Config.Env)
	spec.Config = &cfg
	return spec
}

// ProvisionEnv is a request's plain environment as a sorted list (what
// Build puts into the container's configuration).
func ProvisionEnv(req exechost.ProvisionRequest) []string { return envList(req.Env) }

// MergeEnv is base with over applied the way the daemon applies an exec's
// environment to a container's: a variable of over already in base
// replaces it in place, any other is appended. A pooled sandbox passes its
// provision env as base at every exec, so the tool sees the variables and
// values a cold sandbox's tool sees.
func MergeEnv(base, over []string) []string {
	if len(base) == 0 {
		return over
	}
	out := slices.Clone(base)
	at := make(map[string]int, len(base))
	for i, kv := range base {
		at[envName(kv)] = i
	}
	for _, kv := range over {
		if i, ok := at[envName(kv)]; ok {
			out[i] = kv
			continue
		}
		out = append(out, kv)
	}
	return out
}

func envName(kv string) string {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i]
		}
	}
	return kv
}
