package engine

import (
	"context"
	"strings"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
)

// imageInspector is the one Docker call --pin needs.
type imageInspector interface {
	ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
}

// resolveLocalImage pins a mutable reference (a tag) through the local
// Docker daemon (DOCKER_HOST honoured): agentctl runs where the daemon is in
// the one-machine setup. Scaled out, register digests that every worker's
// daemon can resolve instead.
func resolveLocalImage(ctx context.Context, ref string) (string, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return "", serverErr("--pin: docker client: %w", err)
	}
	defer cli.Close()
	return pinImage(ctx, cli, ref)
}

// pinImage prefers a RepoDigest of the same repository (pullable by other
// daemons), else the local image ID.
func pinImage(ctx context.Context, d imageInspector, ref string) (string, error) {
	img, err := d.ImageInspect(ctx, ref)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return "", usageErr("--pin: image %s not found in the local Docker daemon", ref)
		}
		return "", serverErr("--pin: inspect %s: %w", ref, err)
	}
	repo := repository(ref)
	for _, rd := range img.RepoDigests {
		if r, _, ok := strings.Cut(rd, "@"); ok && r == repo {
			return rd, nil
		}
	}
	if !strings.HasPrefix(img.ID, "sha256:") {
		return "", serverErr("--pin: image %s has an unexpected ID %q", ref, img.ID)
	}
	return img.ID, nil
}

// repository strips the tag from name[:tag]; a port in the registry host
// is not a tag.
func repository(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	slash := strings.LastIndex(ref, "/")
	if i := strings.LastIndex(ref, ":"); i > slash {
		return ref[:i]
	}
	return ref
}
