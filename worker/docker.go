package worker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker/api/types/system"

	dockerclient "github.com/docker/docker/client"

	"github.com/agentflow/agentflow/activities"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/exechost/gitsource"
	"github.com/agentflow/agentflow/internal/metrics"
	"github.com/agentflow/agentflow/internal/objstore"
)

// newDockerBackend connects to the local Docker daemon (DOCKER_HOST
// honoured) and builds the reference host over the worker's checkpoint
// store.
// The daemon is pinged once here so a worker without Docker fails at start
// with a clear error instead of failing every step.
func newDockerBackend(ctx context.Context, cfg Config, store *checkpoint.Sealed, m *metrics.Metrics) (*Backend, error) {
	dc, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	if _, err := dc.Ping(ctx); err != nil {
		dc.Close()
		return nil, fmt.Errorf("docker daemon not reachable (DOCKER_HOST=%q): %w", dc.DaemonHost(), err)
	}
	if err := docker.CheckRuntime(ctx, dc, cfg.Runtime); err != nil {
		dc.Close()
		return nil, err
	}
	if cfg.Runtime != "" {
		cfg.Logger.Info("sandbox runtime", "runtime", cfg.Runtime)
	}
	egress, err := egressOptions(ctx, dc, cfg.Egress, cfg.Runtime, cfg.Logger.With("component", "egress"))
	if err != nil {
		dc.Close()
		return nil, err
	}
	host, err := docker.New(docker.Options{
		Client:  dc,
		Store:   store,
		Git:     gitsource.Config{Roots: cfg.GitRoots},
		Logger:  cfg.Logger.With("component", "exechost"),
		Runtime: cfg.Runtime,
		// Missing images are pulled with the credentials of the worker's
		// Docker config ($DOCKER_CONFIG or ~/.docker), from these only;
		// image errors name the worker as step results do.
		PullRegistries: cfg.PullRegistries,
		Worker:         cfg.Identity,
		Egress:         egress,
		// The warm pool (off by default): its sandboxes carry the
		// worker's sandbox labels, and only steps with those labels (all
		// of them, from RunStep) are served from it.
		Pool: docker.PoolOptions{Size: cfg.WarmPool, MaxIdle: cfg.WarmPoolIdle, Labels: cfg.SandboxLabels, OnTake: m.PoolTake,
			Warm: activities.ToolCommand[:1]},
	})
	if err != nil {
		dc.Close()
		return nil, fmt.Errorf("docker host: %w", err)
	}
	if len(cfg.GitRoots) == 0 {
		cfg.Logger.Info("git import disabled: no --git-root configured")
	} else {
		cfg.Logger.Info("git import enabled", "git_roots", cfg.GitRoots)
	}
	// From here on a failure drains the pool too (it starts nothing before
	// the first Provision, so this is quick).
	closeAll := func() error {
		dctx, cancel := context.WithTimeout(context.Background(), poolDrainTimeout)
		defer cancel()
		err := host.Drain(dctx)
		return errors.Join(err, dc.Close())
	}
	if cfg.WarmPool > 0 {
		cfg.Logger.Info("warm sandbox pool", "per_key", cfg.WarmPool, "max_idle", cfg.WarmPoolIdle)
	}
	if err := runPreflight(ctx, cfg.Preflight, host, cfg.Logger.With("component", "preflight")); err != nil {
		_ = closeAll()
		return nil, err
	}
	// GPUs are attached by the sandbox's device request (DeviceIDs), which
	// needs no NVIDIA runtime for the container itself.
	gpu, gpuDefault, err := hasGPURuntime(ctx, dc)
	if err != nil {
		_ = closeAll()
		return nil, err
	}
	if gpuDefault && cfg.Runtime == "" || strings.Contains(strings.ToLower(cfg.Runtime), "nvidia") {
		cfg.Logger.Warn("the Docker daemon's default runtime is nvidia: it attaches the GPUs a container's environment names, " +
			"so a sandbox whose image sets NVIDIA_VISIBLE_DEVICES (CUDA images set it to all) gets GPUs outside this worker's pinning; " +
			"keep runc the default (nvidia-ctk runtime configure without --set-as-default) and the worker's --runtime other than nvidia")
	}
	return &Backend{
		GPU:    gpu,
		Host:   host,
		Images: host,
		Hosts:  newEgressLookup(egress),
		Ping: func(ctx context.Context) error {
			_, err := dc.Ping(ctx)
			return err
		},
		Reap: func(ctx context.Context) (int, error) {
			reaped, err := host.Reap(ctx, nil) // every agentflow sandbox on this daemon
			n := 0
			for _, r := range reaped {
				if r.Role == "" { // sandboxes; their egress proxies and networks go with them
					n++
				}
			}
			return n, err
		},
		Close: closeAll,
	}, nil
}

// poolDrainTimeout bounds removing the warm pool when the worker stops.
const poolDrainTimeout = time.Minute

// CheckpointKeyDir is where a worker without a key file keeps the key it
// generated: next to the checkpoint directory, not in it, so whoever is
// given the checkpoints (a copy, a backup) is not given the key as well.
func CheckpointKeyDir(checkpointDir string) string {
	return filepath.Join(filepath.Dir(filepath.Clean(checkpointDir)), "checkpoint-keys")
}

// checkpointKeys loads the keys that sign checkpoint manifests and attempt
// records: the operator's --checkpoint-key-file, or a key generated on
// first start next to the checkpoint directory (a worker whose state no
// other worker reads).
func checkpointKeys(cfg Config) (*checkpoint.Keyring, error) {
	if cfg.CheckpointKeyFile != "" {
		return checkpoint.LoadKeyring(cfg.CheckpointKeyFile)
	}
	dir := CheckpointKeyDir(cfg.CheckpointDir)
	keys, created, err := checkpoint.LoadOrCreateLocalKeyring(dir)
	if err != nil {
		return nil, err
	}
	if created {
		cfg.Logger.Info("generated a checkpoint signing key; workers that share checkpoints need a shared --checkpoint-key-file",
			"key_file", filepath.Join(dir, checkpoint.LocalKeyFile), "key_id", keys.SigningKeyID())
	}
	return keys, nil
}

// openCheckpoints loads the keyring and builds the signed checkpoint store
// over objects; the keyring also signs attempt records.
func openCheckpoints(cfg Config, objects objstore.Store) (*checkpoint.Sealed, *checkpoint.Keyring, error) {
	keys, err := checkpointKeys(cfg)
	if err != nil {
		return nil, nil, err
	}
	store, err := checkpointStore(cfg, objects, keys)
	return store, keys, err
}

// checkpointStore is the checkpoint store over objects (the local
// checkpoint directory, or the checkpoints prefix of the shared store)
// behind signed manifests.
func checkpointStore(cfg Config, objects objstore.Store, keys *checkpoint.Keyring) (*checkpoint.Sealed, error) {
	if cfg.InsecureUnsignedCheckpoints {
		cfg.Logger.Warn("unsigned (schema 1) checkpoints are accepted: anyone who can write the store can forge them")
	}
	return checkpoint.NewSealed(checkpoint.NewObject(objects), keys, checkpoint.SealedOptions{AllowUnsigned: cfg.InsecureUnsignedCheckpoints})
}

// hasGPURuntime asks the daemon once, at start, whether it can give
// containers GPUs. `docker run --gpus` needs the NVIDIA container toolkit;
// its documented setup (nvidia-ctk runtime configure) registers a runtime
// named "nvidia", which `docker info` lists. A daemon whose toolkit is only
// reachable through the legacy prestart hook is not detected: its GPU steps
// are treated as on a GPU-less host (see the gpu policy). Probing by
// starting a GPU container would be exact but costs a container per worker
// start and needs an image with nvidia-smi, which is not ours to pull.
// isDefault reports that it is the daemon's default runtime, which
// sandboxes then run under unless --runtime names another.
func hasGPURuntime(ctx context.Context, dc *dockerclient.Client) (runtime, isDefault bool, err error) {
	info, err := dc.Info(ctx)
	if err != nil {
		return false, false, fmt.Errorf("docker info: %w", err)
	}
	return gpuRuntime(info), gpuDefaultRuntime(info), nil
}

// gpuDefaultRuntime: the daemon's default runtime is NVIDIA's.
func gpuDefaultRuntime(info system.Info) bool {
	return strings.Contains(strings.ToLower(info.DefaultRuntime), "nvidia")
}

// gpuRuntime is the pure part of hasGPURuntime.
func gpuRuntime(info system.Info) bool {
	if gpuDefaultRuntime(info) {
		return true
	}
	for name, rt := range info.Runtimes {
		if strings.Contains(strings.ToLower(name), "nvidia") ||
			strings.Contains(strings.ToLower(filepath.Base(rt.Path)), "nvidia") {
			return true
		}
	}
	return false
}
