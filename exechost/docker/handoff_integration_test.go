//go:build integration

package docker_test

import (
	"archive/tar"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/exechost/docker"
	"github.com/agentflow/agentflow/exechost/docker/workspace"
	"github.com/agentflow/agentflow/exechost/docker/workspace/tartest"
)

// countingClient is the daemon's client, recording every exec it creates.
type countingClient struct {
	*client.Client
	mu    sync.Mutex
	execs [][]string
}

func (c *countingClient) ContainerExecCreate(ctx context.Context, id string, o container.ExecOptions) (container.ExecCreateResponse, error) {
	c.mu.Lock()
	c.execs = append(c.execs, slices.Clone(o.Cmd))
	c.mu.Unlock()
	return c.Client.ContainerExecCreate(ctx, id, o)
}

// imports counts the workspace imports (tar -x) created so far.
func (c *countingClient) imports() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, argv := range c.execs {
		if len(argv) > 1 && argv[0] == "tar" && argv[1] == "-x" {
			n++
		}
	}
	return n
}

// setupCounting is setup with a host whose execs are counted.
func setupCounting(t *testing.T) (*env, *countingClient) {
	t.Helper()
	e := setup(t)
	cc := &countingClient{Client: e.c}
	h, err := docker.New(docker.Options{Client: cc, Store: e.sealed, KillGrace: time.Second, Runtime: sandboxRuntime})
	require.NoError(t, err)
	e.host = h
	return e, cc
}

// TestEmptyCheckpointRestoresWithoutImport: the checkpoint of an empty
// workspace restores to an empty workspace without any import exec; a
// one-file checkpoint still takes exactly one.
func TestEmptyCheckpointRestoresWithoutImport(t *testing.T) {
	e, cc := setupCounting(t)
	x, _ := e.provision(t, nil)
	empty, err := e.host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{})
	require.NoError(t, err)
	e.sh(t, x.ExecutionID, "echo hello > f.txt")
	one, err := e.host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{})
	require.NoError(t, err)

	for _, path := range []string{"restore", "provision"} {
		t.Run(path+" empty", func(t *testing.T) {
			before := cc.imports()
			y := e.restoreVia(t, path, empty.CheckpointID)
			require.Equal(t, before, cc.imports(), "no import exec for an empty checkpoint")
			require.Empty(t, string(e.sh(t, y, "ls -A /workspace").Stdout))
			// The sandbox is a normal one: it writes and checkpoints.
			e.sh(t, y, "echo again > g.txt")
			_, err := e.host.Checkpoint(t.Context(), y, exechost.CheckpointRequest{})
			require.NoError(t, err)
		})
		t.Run(path+" one file", func(t *testing.T) {
			before := cc.imports()
			y := e.restoreVia(t, path, one.CheckpointID)
			require.Equal(t, before+1, cc.imports())
			require.Equal(t, "hello\n", string(e.sh(t, y, "cat f.txt").Stdout))
		})
	}
}

// restoreVia restores ck through Restore or through Provision's workspace
// and returns the sandbox (terminated when the test ends).
func (e *env) restoreVia(t *testing.T, path string, ck ...exechost.CheckpointID) exechost.ExecutionID {
	t.Helper()
	id := newID(t)
	var err error
	if path == "restore" {
		require.Len(t, ck, 1)
		_, err = e.host.Restore(t.Context(), e.restoreReq(ck[0], id))
	} else {
		_, err = e.host.Provision(t.Context(), exechost.ProvisionRequest{ExecutionID: id, Image: e.base, Resources: limits(),
			Network: exechost.NetworkNone, Labels: testLabels, Workspace: exechost.Workspace{Checkpoints: ck}})
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.host.Terminate(context.Background(), id)) })
	return id
}

// TestCheckpointLayerEdges: layers that are empty, nearly empty or broken
// at their first entry restore (or are refused) exactly as before imports
// looked at first entries, and the empty ones take no import exec.
func TestCheckpointLayerEdges(t *testing.T) {
	e, cc := setupCounting(t)
	var (
		marker    = tartest.Build()
		padded    = append(tartest.Build(), make([]byte, 10240-1024)...)
		rootOnly  = tartest.Build(tartest.Entry{Name: "./", Type: tar.TypeDir})
		dirOnly   = tartest.Build(tartest.Entry{Name: "d/", Type: tar.TypeDir})
		oneFile   = tartest.Build(tartest.Entry{Name: "f.txt", Type: tar.TypeReg, Body: "one\n"})
		truncated = tartest.Good()[:512+3]
		unsafe    = tartest.Build(tartest.Entry{Name: "l", Type: tar.TypeSymlink, Link: "/etc"}, tartest.Entry{Name: "ok.txt", Type: tar.TypeReg, Body: "x"})
		linkToD   = tartest.Build(tartest.Entry{Name: "d/", Type: tar.TypeDir}, tartest.Entry{Name: "l", Type: tar.TypeSymlink, Link: "d"})
		underL    = tartest.Build(tartest.Entry{Name: "l/x", Type: tar.TypeReg, Body: "x"})
	)
	tests := []struct {
		name   string
		layers [][]byte
		edit   func(*checkpoint.Manifest) // applied to the first layer's signed manifest
		want   error                      // nil: restores
		ls     string                     // ls -A of the restored workspace
		// imports is the number of tar -x execs (0 or 1).
		imports int
	}{
		{name: "end-of-archive blocks only", layers: [][]byte{marker}},
		{name: "marker and record padding", layers: [][]byte{padded}},
		{name: "workspace root only", layers: [][]byte{rootOnly}},
		{name: "two empty layers", layers: [][]byte{marker, rootOnly}},
		{name: "first entry a directory only", layers: [][]byte{dirOnly}, ls: "d\n", imports: 1},
		{name: "empty layer then a file", layers: [][]byte{marker, oneFile}, ls: "f.txt\n", imports: 1},
		{name: "a file then an empty layer", layers: [][]byte{oneFile, marker}, ls: "f.txt\n", imports: 1},
		{name: "truncated", layers: [][]byte{truncated}, want: workspace.ErrMalformedArchive},
		{name: "empty layer then truncated", layers: [][]byte{marker, truncated}, want: workspace.ErrMalformedArchive},
		{name: "zero bytes", layers: [][]byte{{}}, want: workspace.ErrMalformedArchive},
		{name: "unsafe first entry", layers: [][]byte{unsafe}, want: workspace.ErrUnsafeEntry},
		{name: "empty layer then unsafe first entry", layers: [][]byte{rootOnly, unsafe}, want: workspace.ErrUnsafeEntry},
		// The second layer's first entry is checked with everything the
		// first placed: refused during the import, as before.
		{name: "file through a symlink of the layer before", layers: [][]byte{linkToD, underL}, want: workspace.ErrUnsafeEntry},
		// A signed manifest's size is a claim: content that does not
		// match it is refused, never taken for empty.
		{name: "manifest claims 0 bytes, content has a file", layers: [][]byte{oneFile},
			edit: func(m *checkpoint.Manifest) { m.SizeBytes = 0 }, want: exechost.ErrCorruptCheckpoint},
		{name: "manifest claims 0 bytes, content is an empty archive", layers: [][]byte{marker},
			edit: func(m *checkpoint.Manifest) { m.SizeBytes = 0 }, want: exechost.ErrCorruptCheckpoint},
		{name: "manifest claims 0 bytes of an empty layer before a file", layers: [][]byte{marker, oneFile},
			edit: func(m *checkpoint.Manifest) { m.SizeBytes = 0 }, want: exechost.ErrCorruptCheckpoint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ids []exechost.CheckpointID
			for i, layer := range tt.layers {
				edit := tt.edit
				if i > 0 {
					edit = nil
				}
				ids = append(ids, resign(t, e, layer, edit))
			}
			paths := []string{"provision"}
			if len(ids) == 1 {
				paths = append(paths, "restore")
			}
			for _, path := range paths {
				before := cc.imports()
				if tt.want != nil {
					execID := newID(t)
					var err error
					if path == "restore" {
						_, err = e.host.Restore(t.Context(), e.restoreReq(ids[0], execID))
					} else {
						_, err = e.host.Provision(t.Context(), exechost.ProvisionRequest{ExecutionID: execID, Image: e.base,
							Resources: limits(), Network: exechost.NetworkNone, Labels: testLabels,
							Workspace: exechost.Workspace{Checkpoints: ids}})
					}
					if err == nil {
						_ = e.host.Terminate(context.Background(), execID)
					}
					require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint, path)
					require.ErrorIs(t, err, tt.want, path)
					e.requireGone(t, execID)
					continue
				}
				y := e.restoreVia(t, path, ids...)
				require.Equal(t, tt.imports, cc.imports()-before, "%s: import execs", path)
				require.Equal(t, tt.ls, string(e.sh(t, y, "ls -A /workspace").Stdout), path)
			}
		})
	}
}
