package docker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/failure"
)

const (
	testDigest  = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	testImageID = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	testRef     = "127.0.0.1:5000/agentflow/testtool@" + testDigest
)

// fakeImages is a daemon with an image table and a scripted pull.
type fakeImages struct {
	mu     sync.Mutex
	have   map[string]image.InspectResponse // by reference
	pulls  []string
	auths  []string
	pullFn func(ctx context.Context, ref string) (io.ReadCloser, error)
	// onPulled, if set, replaces what a successful pull stores.
	onPulled func(f *fakeImages, ref string)
	// remote is what the registry serves to a distribution inspect, by
	// reference (missing: not found); remoteErr fails every one; asked
	// records them (image_check_test.go).
	remote    map[string]registry.DistributionInspect
	remoteErr error
	asked     []string
}

func (f *fakeImages) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (image.InspectResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	img, ok := f.have[ref]
	if !ok {
		img, ok = f.have[normalised(ref)] // the daemon reads familiar names too
	}
	if !ok {
		return image.InspectResponse{}, errdefs.NotFound(errors.New("No such image: " + ref))
	}
	return img, nil
}

func (f *fakeImages) ImagePull(ctx context.Context, ref string, opts image.PullOptions) (io.ReadCloser, error) {
	f.mu.Lock()
	f.pulls = append(f.pulls, ref)
	f.auths = append(f.auths, opts.RegistryAuth)
	f.mu.Unlock()
	rc, err := f.pullFn(ctx, ref)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if f.onPulled != nil {
		f.onPulled(f, ref)
	} else {
		f.have[ref] = image.InspectResponse{ID: testImageID, RepoDigests: []string{ref}}
	}
	f.mu.Unlock()
	return rc, nil
}

func (f *fakeImages) pullCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pulls)
}

func normalised(ref string) string {
	if n, err := reference.ParseNormalizedNamed(ref); err == nil {
		return n.String()
	}
	return ref
}

// stream is a pull progress stream of the given messages.
func stream(lines ...string) func(context.Context, string) (io.ReadCloser, error) {
	return func(context.Context, string) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(strings.Join(lines, "\n"))), nil
	}
}

var okStream = stream(
	`{"status":"Pulling from agentflow/testtool","id":"x"}`,
	`{"status":"Downloading","progressDetail":{"current":10,"total":300},"id":"aaa"}`,
	`{"status":"Downloading","progressDetail":{"current":300,"total":300},"id":"aaa"}`,
	`{"status":"Downloading","progressDetail":{"current":5,"total":200},"id":"bbb"}`,
	`{"status":"Digest: `+testDigest+`"}`,
)

func newImages(f *fakeImages) *images {
	if f.have == nil {
		f.have = map[string]image.InspectResponse{}
	}
	return &images{c: f, worker: "worker-a", timeout: time.Minute, log: slog.New(slog.DiscardHandler),
		pulls: map[string]*pull{}}
}

func TestEnsureImage(t *testing.T) {
	tests := []struct {
		name     string
		ref      string
		have     map[string]image.InspectResponse
		pullFn   func(context.Context, string) (io.ReadCloser, error)
		onPulled func(*fakeImages, string)
		wantErr  error  // nil = the image is returned
		wantMsg  string // in the error
		pulls    int
	}{
		{name: "present pinned image is not pulled", ref: testRef,
			have: map[string]image.InspectResponse{testRef: {ID: testImageID, RepoDigests: []string{testRef}}}},
		{name: "present local ID", ref: testImageID,
			have: map[string]image.InspectResponse{testImageID: {ID: testImageID}}},
		{name: "docker hub digest matches its familiar form", ref: "busybox@" + testDigest,
			have: map[string]image.InspectResponse{"busybox@" + testDigest: {ID: testImageID, RepoDigests: []string{"busybox@" + testDigest}}}},
		{name: "present image without the digest is refused", ref: testRef,
			have:    map[string]image.InspectResponse{testRef: {ID: testImageID, RepoDigests: []string{"127.0.0.1:5000/other@" + testDigest}}},
			wantErr: exechost.ErrImageNotFound, wantMsg: "is not the image asked for"},
		{name: "missing local ID is never pulled", ref: testImageID,
			wantErr: exechost.ErrImageNotFound, wantMsg: "image " + testImageID + " is not on worker worker-a and a local image ID cannot be pulled"},
		{name: "missing tag is never pulled", ref: "agentflow/testtool:1.0",
			wantErr: exechost.ErrImageNotFound, wantMsg: "never a tag"},
		{name: "missing pinned image is pulled by its digest", ref: testRef, pullFn: okStream, pulls: 1},
		{name: "registry has no such manifest", ref: testRef, pulls: 1,
			pullFn: func(context.Context, string) (io.ReadCloser, error) {
				return nil, errdefs.NotFound(errors.New("manifest unknown"))
			},
			wantErr: exechost.ErrImageNotFound, wantMsg: "its registry does not have it (no credentials): manifest unknown"},
		{name: "registry unreachable", ref: testRef, pulls: 1,
			pullFn: func(context.Context, string) (io.ReadCloser, error) {
				return nil, errdefs.System(errors.New("dial tcp 127.0.0.1:5000: connect: connection refused"))
			},
			wantErr: exechost.ErrImageUnavailable, wantMsg: "could not be pulled (no credentials): dial tcp"},
		{name: "error in the progress stream", ref: testRef, pulls: 1,
			pullFn:  stream(`{"status":"Downloading","id":"a"}`, `{"errorDetail":{"message":"unexpected EOF"},"error":"unexpected EOF"}`),
			wantErr: exechost.ErrImageUnavailable, wantMsg: "unexpected EOF"},
		{name: "truncated progress stream", ref: testRef, pulls: 1,
			pullFn:  stream(`{"status":"Downloading","id":"a"`),
			wantErr: exechost.ErrImageUnavailable, wantMsg: "reading pull progress"},
		{name: "pulled image without the digest is refused", ref: testRef, pulls: 1, pullFn: okStream,
			onPulled: func(f *fakeImages, ref string) {
				f.have[ref] = image.InspectResponse{ID: testImageID, RepoDigests: []string{"127.0.0.1:5000/agentflow/testtool@sha256:" + strings.Repeat("3", 64)}}
			},
			wantErr: exechost.ErrImageNotFound, wantMsg: "is not the image asked for"},
		{name: "pulled image removed before inspect", ref: testRef, pulls: 1, pullFn: okStream,
			onPulled: func(*fakeImages, string) {},
			wantErr:  exechost.ErrImageUnavailable, wantMsg: "was pulled but is gone again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeImages{have: tt.have, pullFn: tt.pullFn, onPulled: tt.onPulled}
			m := newImages(f)
			img, err := m.ensure(t.Context(), tt.ref)
			require.Equal(t, tt.pulls, f.pullCount())
			if tt.pulls > 0 {
				require.Equal(t, []string{tt.ref}, f.pulls, "pulled by exactly the reference asked for")
			}
			if tt.wantErr == nil {
				require.NoError(t, err)
				require.Equal(t, testImageID, img.ID)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			require.ErrorContains(t, err, tt.wantMsg)
			require.ErrorContains(t, err, "worker-a")
			var ie *ImageError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, tt.ref, ie.Image)
			require.Equal(t, "worker-a", ie.Worker)
			// The contract's ErrNotFound and the failure class agree with
			// the sentinel.
			notFound := errors.Is(tt.wantErr, exechost.ErrImageNotFound)
			require.Equal(t, notFound, errors.Is(err, exechost.ErrNotFound))
			require.Equal(t, !notFound, failure.Retryable(failure.HostType(err, false)))
			require.Equal(t, !notFound, failure.Infrastructure(failure.HostType(err, false)))
		})
	}
}

func TestEnsureImageDaemonErrorIsNotAnImageError(t *testing.T) {
	m := newImages(&fakeImages{})
	m.c = inspectErr{errdefs.System(errors.New("daemon down"))}
	_, err := m.ensure(t.Context(), testRef)
	require.ErrorContains(t, err, "inspect image")
	var ie *ImageError
	require.False(t, errors.As(err, &ie))
	require.Equal(t, failure.SandboxLost, failure.HostType(err, false))
}

type inspectErr struct{ err error }

func (e inspectErr) ImageInspect(context.Context, string, ...client.ImageInspectOption) (image.InspectResponse, error) {
	return image.InspectResponse{}, e.err
}

func (e inspectErr) ImagePull(context.Context, string, image.PullOptions) (io.ReadCloser, error) {
	panic("not called")
}

func TestEnsureImagePullsOncePerReference(t *testing.T) {
	const n = 8
	release := make(chan struct{})
	f := &fakeImages{pullFn: func(ctx context.Context, ref string) (io.ReadCloser, error) {
		<-release
		return okStream(ctx, ref)
	}}
	m := newImages(f)
	var joins sync.WaitGroup
	joins.Add(n)
	m.joined = func(string) { joins.Done() }

	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := m.ensure(t.Context(), testRef)
			errs <- err
		}()
	}
	joins.Wait() // every caller waits for the one pull
	close(release)
	for range n {
		require.NoError(t, <-errs)
	}
	require.Equal(t, 1, f.pullCount())
}

func TestEnsureImageWaiterLeavesPullGoesOn(t *testing.T) {
	release := make(chan struct{})
	f := &fakeImages{pullFn: func(ctx context.Context, ref string) (io.ReadCloser, error) {
		<-release
		return okStream(ctx, ref)
	}}
	m := newImages(f)
	joined := make(chan struct{}, 2)
	m.joined = func(string) { joined <- struct{}{} }

	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() {
		_, err := m.ensure(ctx, testRef)
		first <- err
	}()
	<-joined
	cancel()
	err := <-first
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, exechost.ErrImageUnavailable)

	// The pull is still in flight: a later caller joins it, not a new one.
	second := make(chan error, 1)
	go func() {
		_, err := m.ensure(t.Context(), testRef)
		second <- err
	}()
	<-joined
	close(release)
	require.NoError(t, <-second)
	require.Equal(t, 1, f.pullCount())
}

func TestEnsureImagePullTimeout(t *testing.T) {
	f := &fakeImages{pullFn: func(ctx context.Context, _ string) (io.ReadCloser, error) {
		<-ctx.Done() // a registry that never answers
		return nil, ctx.Err()
	}}
	m := newImages(f)
	m.timeout = time.Millisecond
	_, err := m.ensure(t.Context(), testRef)
	require.ErrorIs(t, err, exechost.ErrImageUnavailable)
	require.ErrorContains(t, err, "could not be pulled within 1ms")
}

func TestEnsureImageSendsWorkerCredentials(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, `{"auths":{"127.0.0.1:5000":{"auth":"`+b64("alice:s3cret")+`"}}}`)
	f := &fakeImages{pullFn: okStream}
	m := newImages(f)
	m.creds = registryCredentials{dir: dir}
	_, err := m.ensure(t.Context(), testRef)
	require.NoError(t, err)
	require.Len(t, f.auths, 1)
	got, err := registry.DecodeAuthConfig(f.auths[0])
	require.NoError(t, err)
	require.Equal(t, "alice", got.Username)
	require.Equal(t, "s3cret", got.Password)
	require.Equal(t, "127.0.0.1:5000", got.ServerAddress)
}

func TestEnsureImageBrokenCredentialsAreUnavailable(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, `{"auths":`)
	f := &fakeImages{pullFn: okStream}
	m := newImages(f)
	m.creds = registryCredentials{dir: dir}
	_, err := m.ensure(t.Context(), testRef)
	require.ErrorIs(t, err, exechost.ErrImageUnavailable)
	require.ErrorContains(t, err, "registry credentials: docker config")
	require.Zero(t, f.pullCount())
}

func TestDrainPullCountsLayerBytes(t *testing.T) {
	rc, _ := okStream(context.Background(), "")
	n, err := drainPull(rc)
	require.NoError(t, err)
	require.Equal(t, int64(500), n)
}

func TestEnsureImagePullsOnlyFromAllowedRegistries(t *testing.T) {
	tests := []struct {
		name       string
		registries []string
		ref        string
		pulled     bool
	}{
		{name: "any registry when none listed", ref: testRef, pulled: true},
		{name: "listed registry", registries: []string{"ghcr.io", "127.0.0.1:5000"}, ref: testRef, pulled: true},
		{name: "same host, other port", registries: []string{"127.0.0.1:5001"}, ref: testRef},
		{name: "host names ignore case", registries: []string{"Registry.Local:5000"}, ref: "registry.local:5000/a@" + testDigest, pulled: true},
		{name: "docker hub by its domain", registries: []string{"docker.io"}, ref: "busybox@" + testDigest, pulled: true},
		{name: "docker hub not listed", registries: []string{"127.0.0.1:5000"}, ref: "busybox@" + testDigest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeImages{pullFn: okStream}
			m := newImages(f)
			m.registries = tt.registries
			_, err := m.ensure(t.Context(), tt.ref)
			if tt.pulled {
				require.NoError(t, err)
				require.Equal(t, 1, f.pullCount())
				return
			}
			require.ErrorIs(t, err, exechost.ErrImageNotFound)
			require.ErrorContains(t, err, "is not one this worker pulls from")
			require.Zero(t, f.pullCount(), "nothing contacted")
		})
	}
}

func TestCheckPullRegistries(t *testing.T) {
	for _, ok := range []string{"docker.io", "ghcr.io", "127.0.0.1:5000", "registry.local:5000", "localhost"} {
		require.NoError(t, CheckPullRegistries([]string{ok}), ok)
	}
	for _, bad := range []string{"", "https://ghcr.io", "ghcr.io/org", "-x", "reg:port", "reg.", "[::1]:5000"} {
		require.Error(t, CheckPullRegistries([]string{bad}), bad)
	}
}
