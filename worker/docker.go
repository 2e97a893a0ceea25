package worker

import (
	"context"
	"fmt"

	dockerclient "github.com/docker/docker/client"

	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/exechost/docker"
)

// newDockerBackend connects to the local Docker daemon (DOCKER_HOST
// honoured) and builds the reference host over a local checkpoint store.
// The daemon is pinged once here so a worker without Docker fails at start
// with a clear error instead of failing every step.
func newDockerBackend(ctx context.Context, cfg Config) (*Backend, error) {
	dc, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	if _, err := dc.Ping(ctx); err != nil {
		dc.Close()
		return nil, fmt.Errorf("docker daemon not reachable (DOCKER_HOST=%q): %w", dc.DaemonHost(), err)
	}
	store, err := checkpoint.NewLocal(cfg.CheckpointDir)
	if err != nil {
		dc.Close()
		return nil, fmt.Errorf("checkpoint store %s: %w", cfg.CheckpointDir, err)
	}
	host, err := docker.New(docker.Options{
		Client: dc,
		Store:  store,
		Logger: cfg.Logger.With("component", "exechost"),
	})
	if err != nil {
		dc.Close()
		return nil, fmt.Errorf("docker host: %w", err)
	}
	return &Backend{
		Host: host,
		Ping: func(ctx context.Context) error {
			_, err := dc.Ping(ctx)
			return err
		},
		Reap: func(ctx context.Context) (int, error) {
			reaped, err := host.Reap(ctx, nil) // every agentflow sandbox on this daemon
			return len(reaped), err
		},
		Close: dc.Close,
	}, nil
}
