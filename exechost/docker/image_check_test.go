package docker

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
)

// otherDigest is a digest no test image has.
const otherDigest = "sha256:3333333333333333333333333333333333333333333333333333333333333333"

// DistributionInspect answers from f.remote (by reference) or f.remoteErr.
func (f *fakeImages) DistributionInspect(_ context.Context, ref, _ string) (registry.DistributionInspect, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, ref)
	if f.remoteErr != nil {
		return registry.DistributionInspect{}, f.remoteErr
	}
	d, ok := f.remote[ref]
	if !ok {
		return registry.DistributionInspect{}, errdefs.NotFound(errors.New("manifest unknown"))
	}
	return d, nil
}

func (e inspectErr) DistributionInspect(context.Context, string, string) (registry.DistributionInspect, error) {
	panic("not called")
}

func TestCheckImage(t *testing.T) {
	tests := []struct {
		name       string
		ref        string
		have       map[string]image.InspectResponse
		remote     map[string]registry.DistributionInspect // what the registry serves, by reference
		remoteErr  error
		registries []string
		wantNote   string
		wantErr    error
		wantMsg    string
		asked      bool // the registry was asked
	}{
		{name: "present pinned image", ref: testRef,
			have:     map[string]image.InspectResponse{testRef: {ID: testImageID, RepoDigests: []string{testRef}}},
			wantNote: "present on the worker's daemon"},
		{name: "present local ID", ref: testImageID,
			have:     map[string]image.InspectResponse{testImageID: {ID: testImageID}},
			wantNote: "present on the worker's daemon"},
		{name: "present image without the digest", ref: testRef,
			have:    map[string]image.InspectResponse{testRef: {ID: testImageID, RepoDigests: []string{"127.0.0.1:5000/other@" + testDigest}}},
			wantErr: exechost.ErrImageNotFound, wantMsg: "is not the image asked for"},
		{name: "missing local ID", ref: testImageID,
			wantErr: exechost.ErrImageNotFound, wantMsg: "a local image ID cannot be pulled"},
		{name: "missing tag", ref: "agentflow/testtool:1.0",
			wantErr: exechost.ErrImageNotFound, wantMsg: "never a tag"},
		{name: "missing digest the registry has", ref: testRef, remote: map[string]registry.DistributionInspect{testRef: {Descriptor: ocispec.Descriptor{Digest: testDigest}}},
			wantNote: "pullable from 127.0.0.1:5000 (no credentials)", asked: true},
		{name: "missing digest the registry lacks", ref: testRef, asked: true,
			wantErr: exechost.ErrImageNotFound, wantMsg: "its registry does not have it (no credentials): manifest unknown"},
		{name: "registry unreachable", ref: testRef, asked: true,
			remoteErr: errdefs.System(errors.New("dial tcp 127.0.0.1:5000: connect: connection refused")),
			wantErr:   exechost.ErrImageUnavailable, wantMsg: "its registry did not confirm it (no credentials): dial tcp"},
		{name: "registry serves another digest", ref: testRef, remote: map[string]registry.DistributionInspect{testRef: {Descriptor: ocispec.Descriptor{Digest: otherDigest}}}, asked: true,
			wantErr: exechost.ErrImageNotFound, wantMsg: "serves digest " + otherDigest},
		{name: "registry not allowed", ref: testRef, registries: []string{"ghcr.io"},
			wantErr: exechost.ErrImageNotFound, wantMsg: "is not one this worker pulls from (ghcr.io)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeImages{have: tt.have, remote: tt.remote, remoteErr: tt.remoteErr,
				pullFn: func(context.Context, string) (io.ReadCloser, error) { panic("check must never pull") }}
			m := newImages(f)
			m.registries = tt.registries
			note, err := m.check(t.Context(), tt.ref)
			require.Zero(t, f.pullCount(), "nothing is pulled")
			require.Equal(t, tt.asked, len(f.asked) > 0)
			if tt.wantErr == nil {
				require.NoError(t, err)
				require.Contains(t, note, tt.wantNote)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			require.ErrorContains(t, err, tt.wantMsg)
			require.ErrorContains(t, err, tt.ref)
			require.ErrorContains(t, err, "worker-a")
		})
	}
}
