package docker

import (
	"context"
	"fmt"

	"github.com/distribution/reference"
	"github.com/docker/docker/errdefs"
)

// CheckImage answers the dry-run preflight (activities.ImageChecker): can a
// step with image ref start on this worker? It runs the rules Provision
// runs (image.go: present and, for repo@sha256, recorded under that
// digest; else pullable: digest-pinned, from an allowed registry) but
// pulls nothing: for a missing repo@sha256 it asks the registry for the
// manifest through the daemon (a distribution inspect, with the worker's
// credentials). The note says how the image would be had; an error is an
// *ImageError naming the image and this worker.
func (h *Host) CheckImage(ctx context.Context, ref string) (string, error) {
	return h.images.check(ctx, ref)
}

func (m *images) check(ctx context.Context, ref string) (string, error) {
	img, err := m.c.ImageInspect(ctx, ref)
	if err != nil && !errdefs.IsNotFound(err) {
		return "", m.unavailable(ref, "could not be inspected", err)
	}
	if err == nil {
		if named, pinned := pinnedName(ref); pinned {
			if err := m.verify(ref, named, img); err != nil {
				return "", err
			}
		}
		return "present on the worker's daemon", nil
	}
	named, err := m.pullable(ref)
	if err != nil {
		return "", err
	}
	return m.inspectRemote(ctx, ref, named)
}

// inspectRemote asks named's registry for its manifest, as the pull would
// fetch it, and checks the registry's digest is the one pinned. Messages
// name ref as the step wrote it.
func (m *images) inspectRemote(ctx context.Context, ref string, named reference.Canonical) (string, error) {
	auth, via, err := m.auth(ctx, named)
	if err != nil {
		return "", m.unavailable(ref, "its registry cannot be asked: registry credentials", err)
	}
	d, err := m.c.DistributionInspect(ctx, named.String(), auth)
	switch {
	case errdefs.IsNotFound(err):
		return "", m.notFound(ref, fmt.Sprintf("image %s is not on worker %s and its registry does not have it (%s)",
			ref, m.worker, via), err)
	case err != nil:
		// Unreachable, refused credentials (which registries often report
		// for a repository that does not exist), 5xx: a run would retry
		// the pull on the infrastructure budget, but today it cannot pull.
		return "", m.unavailable(ref, fmt.Sprintf("its registry did not confirm it (%s)", via), err)
	}
	if d.Descriptor.Digest != named.Digest() {
		return "", m.notFound(ref, fmt.Sprintf("image %s is not on worker %s and its registry serves digest %s for it",
			ref, m.worker, d.Descriptor.Digest), nil)
	}
	return fmt.Sprintf("not on the worker's daemon; pullable from %s (%s)", reference.Domain(named), via), nil
}
