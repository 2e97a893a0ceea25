package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"

	"github.com/agentflow/agentflow/exechost"
)

// Image resolution on a worker: a step's image the daemon lacks is pulled
// by digest, then verified. docs/security/images.md is the narrative.

// DefaultPullTimeout bounds one image pull (Options.PullTimeout).
const DefaultPullTimeout = 10 * time.Minute

// imageClient is the part of the daemon API image resolution uses.
type imageClient interface {
	ImageInspect(ctx context.Context, imageID string, inspectOpts ...client.ImageInspectOption) (image.InspectResponse, error)
	ImagePull(ctx context.Context, ref string, options image.PullOptions) (io.ReadCloser, error)
	// DistributionInspect asks the image's registry for its manifest
	// (check: the dry-run preflight); nothing is downloaded.
	DistributionInspect(ctx context.Context, imageRef, encodedRegistryAuth string) (registry.DistributionInspect, error)
}

// ImageError says why a step's image is not available on this worker. It
// matches exechost.ErrImageNotFound (and exechost.ErrNotFound) when no
// retry can help — a local image ID the daemon lacks, a mutable reference,
// a digest its registry does not hold, a pulled image that is not the one
// asked for — and exechost.ErrImageUnavailable when one may: the registry
// unreachable, failing or refusing this worker's credentials, a pull cut
// short or over its time bound.
type ImageError struct {
	Image  string // the reference as the step gave it
	Worker string // the worker whose daemon lacks it
	// NotFound: the image cannot be had by this worker at all.
	NotFound bool
	msg      string
	// Err is the daemon's or the credential lookup's error, if any.
	Err error
}

func (e *ImageError) Error() string {
	if e.Err == nil {
		return e.msg
	}
	return e.msg + ": " + e.Err.Error()
}

func (e *ImageError) Unwrap() error { return e.Err }

// Is makes the error match its class's sentinels.
func (e *ImageError) Is(target error) bool {
	if e.NotFound {
		return target == exechost.ErrImageNotFound || target == exechost.ErrNotFound
	}
	return target == exechost.ErrImageUnavailable
}

// images resolves step images on one daemon. Concurrent resolutions of
// the same missing reference share one pull.
type images struct {
	c       imageClient
	worker  string
	creds   registryCredentials
	timeout time.Duration
	log     *slog.Logger
	// registries, if not empty, are the only registry domains pulled from.
	registries []string

	mu    sync.Mutex
	pulls map[string]*pull // by normalised reference
	// joined, if set, is called (under mu) each time a caller starts
	// waiting for a pull: tests use it to know every caller shares one.
	joined func(ref string)
}

// pull is one in-flight ImagePull; err is set before done is closed.
type pull struct {
	done chan struct{}
	err  error
}

// ensure returns the daemon's record of ref, pulling it first when the
// daemon lacks it and ref is digest-pinned ("repo@sha256:…"). Nothing
// else is ever pulled: a local image ID names no registry, and a tag
// could name anything by the time it is pulled.
func (m *images) ensure(ctx context.Context, ref string) (image.InspectResponse, error) {
	img, err := m.c.ImageInspect(ctx, ref)
	if err != nil && !errdefs.IsNotFound(err) {
		return image.InspectResponse{}, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	if err == nil {
		if named, pinned := pinnedName(ref); pinned {
			return img, m.verify(ref, named, img)
		}
		return img, nil
	}
	named, err := m.pullable(ref)
	if err != nil {
		return image.InspectResponse{}, err
	}
	if err := m.pullOnce(ctx, named); err != nil {
		return image.InspectResponse{}, err
	}
	img, err = m.c.ImageInspect(ctx, ref)
	if errdefs.IsNotFound(err) {
		// Removed between the pull and now (someone ran docker rmi): a
		// retry pulls it again.
		return image.InspectResponse{}, m.unavailable(ref, "was pulled but is gone again", err)
	}
	if err != nil {
		return image.InspectResponse{}, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	return img, m.verify(ref, named, img)
}

// pullable decides whether ref, missing on the daemon, may be pulled: only
// a digest-pinned reference, and only from an allowed registry. ensure and
// check (the dry-run preflight) share this one rule.
func (m *images) pullable(ref string) (reference.Canonical, error) {
	named, pinned := pinnedName(ref)
	switch {
	case pinned:
	case strings.HasPrefix(ref, "sha256:"):
		return nil, m.notFound(ref, fmt.Sprintf(
			"image %s is not on worker %s and a local image ID cannot be pulled; load the image on every worker or use repo@sha256:<digest>",
			ref, m.worker), nil)
	default:
		return nil, m.notFound(ref, fmt.Sprintf(
			"image %s is not on worker %s and is not pulled: only digest-pinned references (repo@sha256:<digest>) are pulled, never a tag",
			ref, m.worker), nil)
	}
	domain := reference.Domain(named)
	// Host names are case-insensitive; the port must match.
	if len(m.registries) > 0 && !slices.ContainsFunc(m.registries, func(r string) bool { return strings.EqualFold(r, domain) }) {
		return nil, m.notFound(ref, fmt.Sprintf(
			"image %s is not on worker %s and its registry %s is not one this worker pulls from (%s)",
			ref, m.worker, domain, strings.Join(m.registries, ", ")), nil)
	}
	return named, nil
}

// registryRe is a registry domain as image references name it:
// host[:port], no scheme, no path.
var registryRe = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?(:[0-9]{1,5})?$`)

// CheckPullRegistries refuses registry names that no image reference could
// name (Options.PullRegistries): a scheme, a path, "" or an option.
func CheckPullRegistries(registries []string) error {
	for _, r := range registries {
		if !registryRe.MatchString(r) {
			return fmt.Errorf("pull registry %q: want host[:port] as in image references (docker.io for Docker Hub)", r)
		}
	}
	return nil
}

// pinnedName parses ref as a digest-pinned repository reference (no tag).
func pinnedName(ref string) (reference.Canonical, bool) {
	if !strings.Contains(ref, "@") {
		return nil, false
	}
	n, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return nil, false
	}
	c, ok := n.(reference.Canonical)
	if _, tagged := n.(reference.Tagged); !ok || tagged {
		return nil, false
	}
	return c, true
}

// verify checks that the daemon's image carries exactly the repository
// digest asked for. The daemon verifies the manifest it pulled against the
// digest; this makes sure the image the container will run (by ID) is the
// one that pull recorded for this reference.
func (m *images) verify(ref string, want reference.Canonical, img image.InspectResponse) error {
	for _, rd := range img.RepoDigests {
		if n, err := reference.ParseNormalizedNamed(rd); err == nil && n.String() == want.String() {
			return nil
		}
	}
	return m.notFound(ref, fmt.Sprintf("image %s on worker %s is not the image asked for: the daemon's image %s records repository digests %v",
		ref, m.worker, img.ID, img.RepoDigests), nil)
}

// pullOnce pulls named, joining a pull of the same reference already in
// flight. The pull runs on its own context bounded by the pull timeout: a
// waiter whose context ends returns at once, and the pull goes on for the
// others (and for the retry of an attempt whose budget ran out mid-pull).
func (m *images) pullOnce(ctx context.Context, named reference.Canonical) error {
	key := named.String()
	m.mu.Lock()
	p, ok := m.pulls[key]
	if !ok {
		p = &pull{done: make(chan struct{})}
		m.pulls[key] = p
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.timeout)
		go func() {
			defer cancel()
			p.err = m.pull(pctx, named)
			m.mu.Lock()
			delete(m.pulls, key)
			m.mu.Unlock()
			close(p.done)
		}()
	}
	if m.joined != nil {
		m.joined(key)
	}
	m.mu.Unlock()
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return m.unavailable(named.String(), "was still being pulled when the attempt ended", ctx.Err())
	}
}

// pull runs one ImagePull and drains its progress stream.
func (m *images) pull(ctx context.Context, named reference.Canonical) error {
	ref := named.String()
	start := time.Now()
	var opts image.PullOptions
	var via string
	var err error
	if opts.RegistryAuth, via, err = m.auth(ctx, named); err != nil {
		return m.unavailable(ref, "could not be pulled: registry credentials", err)
	}
	m.log.Info("pulling image", "image", ref, "worker", m.worker, "credentials", via)
	rc, err := m.c.ImagePull(ctx, ref, opts)
	if err == nil {
		var n int64
		n, err = drainPull(rc)
		rc.Close()
		if err == nil {
			m.log.Info("pulled image", "image", ref, "worker", m.worker,
				"duration_ms", time.Since(start).Milliseconds(), "bytes", n)
			return nil
		}
	}
	switch {
	case ctx.Err() != nil:
		return m.unavailable(ref, fmt.Sprintf("could not be pulled within %s (%s)", m.timeout, via), err)
	case errdefs.IsNotFound(err):
		// The registry answered and has no such manifest (or repository):
		// asking again, here or on another worker, cannot help.
		return m.notFound(ref, fmt.Sprintf("image %s is not on worker %s and its registry does not have it (%s)",
			ref, m.worker, via), err)
	default:
		// Unreachable, 5xx, cut short — or credentials refused, which the
		// daemon reports as a plain server error: a worker-local problem
		// (another worker, or this one once its Docker config is fixed, can
		// pull the image), so it is retried on the infrastructure budget.
		return m.unavailable(ref, fmt.Sprintf("could not be pulled (%s)", via), err)
	}
}

// auth is the encoded registry credentials of the worker for named's
// registry ("" when it has none) and, for messages, where they came from.
func (m *images) auth(ctx context.Context, named reference.Canonical) (encoded, via string, err error) {
	creds, err := m.creds.lookup(ctx, reference.Domain(named))
	if err != nil {
		return "", "", err
	}
	if creds.source == "" {
		return "", "no credentials", nil
	}
	if encoded, err = registry.EncodeAuthConfig(creds.auth); err != nil {
		return "", "", err
	}
	return encoded, "credentials from " + creds.source, nil
}

func (m *images) notFound(ref, msg string, err error) *ImageError {
	return &ImageError{Image: ref, Worker: m.worker, NotFound: true, msg: msg, Err: err}
}

func (m *images) unavailable(ref, what string, err error) *ImageError {
	return &ImageError{Image: ref, Worker: m.worker,
		msg: fmt.Sprintf("image %s is not on worker %s and %s", ref, m.worker, what), Err: err}
}

// pullMessage is the part of a progress-stream message a pull needs.
type pullMessage struct {
	Status      string `json:"status"`
	ID          string `json:"id"`
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
	ProgressDetail struct {
		Total int64 `json:"total"`
	} `json:"progressDetail"`
}

// maxPullError bounds the daemon message quoted in an error.
const maxPullError = 1 << 10

// drainPull reads the progress stream to its end: the pull is finished
// only then. It returns the bytes downloaded (as the daemon reports layer
// sizes) and the first error message of the stream.
func drainPull(r io.Reader) (int64, error) {
	layers := map[string]int64{}
	dec := json.NewDecoder(r)
	for {
		var msg pullMessage
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return 0, fmt.Errorf("reading pull progress: %w", err)
		}
		if text := msg.Error; text != "" || msg.ErrorDetail != nil {
			if text == "" {
				text = msg.ErrorDetail.Message
			}
			if text == "" {
				text = "the daemon reported an error without a message"
			}
			if len(text) > maxPullError {
				text = text[:maxPullError] + "…"
			}
			return 0, errors.New(text)
		}
		if msg.Status == "Downloading" && msg.ProgressDetail.Total > layers[msg.ID] {
			layers[msg.ID] = msg.ProgressDetail.Total
		}
	}
	var n int64
	for _, b := range layers {
		n += b
	}
	return n, nil
}
