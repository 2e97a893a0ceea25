//go:build integration

package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/checkpoint"
	"github.com/agentflow/agentflow/exechost/docker/workspace/tartest"
)

// storedCheckpoint is one honest checkpoint, as bytes, to copy and tamper.
type storedCheckpoint struct {
	m       checkpoint.Manifest
	content []byte
	json    string
}

// realCheckpoint makes a sandbox with some files and checkpoints it.
func realCheckpoint(t *testing.T, e *env) storedCheckpoint {
	t.Helper()
	x, _ := e.provision(t, nil)
	e.sh(t, x.ExecutionID, `set -e
mkdir -p d/sub && echo hello > d/f.txt && head -c 70000 /dev/urandom > d/sub/blob && ln -s d/f.txt link`)
	ck, err := e.host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{Reason: "tamper"})
	require.NoError(t, err)
	require.NoError(t, e.host.Terminate(t.Context(), x.ExecutionID))
	content, err := os.ReadFile(filepath.Join(e.store.Dir(), string(ck.CheckpointID)+".tar"))
	require.NoError(t, err)
	js, err := os.ReadFile(filepath.Join(e.store.Dir(), string(ck.CheckpointID)+".json"))
	require.NoError(t, err)
	m, err := e.sealed.Stat(t.Context(), ck.CheckpointID)
	require.NoError(t, err)
	require.Greater(t, len(content), 70000)
	return storedCheckpoint{m: m, content: content, json: string(js)}
}

var ckSeq int

// copyAs stores content and manifest JSON under a new ID, behind the
// host's back, as a writer to the storage could.
func copyAs(t *testing.T, e *env, content []byte, manifestJSON string, oldID exechost.CheckpointID) exechost.CheckpointID {
	t.Helper()
	id := exechost.CheckpointID("ckpt-copy-" + randomSuffix())
	js := strings.Replace(manifestJSON, `"id": "`+string(oldID)+`"`, `"id": "`+string(id)+`"`, 1)
	require.NoError(t, os.WriteFile(filepath.Join(e.store.Dir(), string(id)+".tar"), content, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(e.store.Dir(), string(id)+".json"), []byte(js), 0o600))
	return id
}

// resign stores content under a new ID with a manifest the worker's own key
// signed, after edit changed it: the manifest is authentic, the content may
// still not match it.
func resign(t *testing.T, e *env, content []byte, edit func(*checkpoint.Manifest)) exechost.CheckpointID {
	t.Helper()
	ckSeq++
	id := exechost.CheckpointID(fmt.Sprintf("ckpt-signed-%d-%s", ckSeq, randomSuffix()))
	_, err := e.sealed.Put(t.Context(), checkpoint.Manifest{ID: id, ExecutionID: "tamper", ImageDigest: e.base,
		Resources: limits(), Reason: "tamper"},
		bytes.NewReader(content), func(m checkpoint.Manifest) (checkpoint.Manifest, error) {
			if edit != nil {
				edit(&m)
			}
			return m, nil
		})
	require.NoError(t, err)
	return id
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 8)
	for _, c := range b {
		out = append(out, hex[c>>4], hex[c&15])
	}
	return string(out)
}

func flip(b []byte, at int) []byte {
	c := bytes.Clone(b)
	c[at] ^= 0x01
	return c
}

// requireRefused restores id through Provision and through Restore and
// expects a corrupt checkpoint with no sandbox left behind.
func requireRefused(t *testing.T, e *env, id exechost.CheckpointID) {
	t.Helper()
	for _, path := range []string{"provision", "restore"} {
		execID := newID(t)
		var err error
		if path == "provision" {
			_, err = e.host.Provision(t.Context(), exechost.ProvisionRequest{ExecutionID: execID, Image: e.base, Resources: limits(),
				Network: exechost.NetworkNone, Labels: testLabels, Workspace: exechost.Workspace{Checkpoints: []exechost.CheckpointID{id}}})
		} else {
			_, err = e.host.Restore(t.Context(), e.restoreReq(id, execID))
		}
		if err == nil {
			_ = e.host.Terminate(context.Background(), execID)
		}
		require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint, "%s of %s", path, id)
		e.requireGone(t, execID)
	}
}

func TestTamperedCheckpointIsRefused(t *testing.T) {
	e := setup(t)
	orig := realCheckpoint(t, e)
	n := len(orig.content)
	garbage := make([]byte, 1<<20)
	_, _ = rand.Read(garbage)
	garbage[0] = 'G'

	// The honest copy restores: the test can pass.
	t.Run("untampered restores", func(t *testing.T) {
		id := copyAs(t, e, orig.content, orig.json, orig.m.ID)
		_, err := e.sealed.Stat(t.Context(), id)
		require.ErrorIs(t, err, exechost.ErrCorruptCheckpoint, "a copy under another ID fails the MAC (the ID is signed)")
		id = resign(t, e, orig.content, nil)
		y, err := e.host.Restore(t.Context(), e.restoreReq(id, newID(t)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.host.Terminate(context.Background(), y.ExecutionID) })
		require.Equal(t, "hello\n", string(e.sh(t, y.ExecutionID, "cat link").Stdout))
	})

	// Content changed under an authentic manifest.
	content := map[string][]byte{
		"byte flip in first header":    flip(orig.content, 10),
		"byte flip in first checksum":  flip(orig.content, 150),
		"byte flip in content":         flip(orig.content, n/2),
		"byte flip in last content":    flip(orig.content, n-1024-600),
		"byte flip in end marker":      flip(orig.content, n-3),
		"shorter: truncated":           orig.content[:n/2],
		"shorter: another valid tar":   tartest.Good(),
		"shorter: marker cut":          orig.content[:n-1024],
		"longer: zero padding":         append(bytes.Clone(orig.content), make([]byte, 512)...),
		"longer: 1 MiB trailing bytes": append(bytes.Clone(orig.content), garbage...),
		"same size, different archive": sameSize(t, orig.content),
		"empty":                        {},
	}
	for name, c := range content {
		t.Run(name, func(t *testing.T) {
			id := resign(t, e, orig.content, nil)
			require.NoError(t, os.WriteFile(filepath.Join(e.store.Dir(), string(id)+".tar"), c, 0o600))
			requireRefused(t, e, id)
		})
	}

	// Authentic manifests whose digest or size are wrong, and honest
	// digests of content that is not one archive.
	signed := map[string]func() exechost.CheckpointID{
		"wrong but valid sha256": func() exechost.CheckpointID {
			return resign(t, e, orig.content, func(m *checkpoint.Manifest) { m.SHA256 = strings.Repeat("ab", 32) })
		},
		"size one short": func() exechost.CheckpointID {
			return resign(t, e, orig.content, func(m *checkpoint.Manifest) { m.SizeBytes-- })
		},
		"size one long": func() exechost.CheckpointID {
			return resign(t, e, orig.content, func(m *checkpoint.Manifest) { m.SizeBytes++ })
		},
		"honest digest of 1 MiB trailing garbage": func() exechost.CheckpointID {
			return resign(t, e, append(bytes.Clone(orig.content), garbage...), nil)
		},
		"honest digest of zeros past the record": func() exechost.CheckpointID {
			return resign(t, e, append(bytes.Clone(orig.content), make([]byte, 20<<10)...), nil)
		},
	}
	for name, mk := range signed {
		t.Run(name, func(t *testing.T) { requireRefused(t, e, mk()) })
	}

	// Manifest edits by someone without the key, each on a freshly signed
	// checkpoint of the same content.
	edits := map[string]func(j string, m checkpoint.Manifest) string{
		"image": func(j string, m checkpoint.Manifest) string {
			return strings.Replace(j, m.ImageDigest, "sha256:"+strings.Repeat("e", 64), 1)
		},
		"memory": func(j string, _ checkpoint.Manifest) string {
			return strings.Replace(j, `"MemoryBytes": 134217728`, `"MemoryBytes": 268435456`, 1)
		},
		"disk": func(j string, _ checkpoint.Manifest) string {
			return strings.Replace(j, `"DiskBytes": 33554432`, `"DiskBytes": 1073741824`, 1)
		},
		"gpus": func(j string, _ checkpoint.Manifest) string { return strings.Replace(j, `"GPUs": 0`, `"GPUs": -1`, 1) },
		"reason": func(j string, _ checkpoint.Manifest) string {
			return strings.Replace(j, `"reason": "tamper"`, `"reason": "other"`, 1)
		},
		"execution": func(j string, _ checkpoint.Manifest) string {
			return strings.Replace(j, `"execution_id": "tamper"`, `"execution_id": "other"`, 1)
		},
		"sha256": func(j string, m checkpoint.Manifest) string {
			return strings.Replace(j, m.SHA256, strings.Repeat("0", 64), 1)
		},
		"size": func(j string, m checkpoint.Manifest) string {
			return strings.Replace(j, fmt.Sprintf(`"size_bytes": %d`, m.SizeBytes), `"size_bytes": 1024`, 1)
		},
		"created": func(j string, _ checkpoint.Manifest) string {
			return strings.Replace(j, `"created_at": "2`, `"created_at": "1`, 1)
		},
		"mac removed": func(j string, m checkpoint.Manifest) string {
			return strings.Replace(j, ",\n  \"mac\": \""+m.MAC+"\"", "", 1)
		},
		"mac emptied": func(j string, m checkpoint.Manifest) string { return strings.Replace(j, m.MAC, "", 1) },
		"mac forged": func(j string, m checkpoint.Manifest) string {
			return strings.Replace(j, m.MAC, strings.Repeat("f", 64), 1)
		},
		"key id swapped": func(j string, m checkpoint.Manifest) string {
			return strings.Replace(j, `"key_id": "`+m.KeyID+`"`, `"key_id": "attacker"`, 1)
		},
		"schema downgrade": func(j string, m checkpoint.Manifest) string {
			j = strings.Replace(j, `"schema_version": 2`, `"schema_version": 1`, 1)
			j = strings.Replace(j, ",\n  \"key_id\": \""+m.KeyID+"\"", "", 1)
			return strings.Replace(j, ",\n  \"mac\": \""+m.MAC+"\"", "", 1)
		},
		"schema from the future": func(j string, _ checkpoint.Manifest) string {
			return strings.Replace(j, `"schema_version": 2`, `"schema_version": 3`, 1)
		},
		"unknown field": func(j string, _ checkpoint.Manifest) string {
			return strings.Replace(j, `"id":`, `"trusted": true, "id":`, 1)
		},
	}
	for name, edit := range edits {
		t.Run("manifest "+name, func(t *testing.T) {
			id := resign(t, e, orig.content, nil)
			path := filepath.Join(e.store.Dir(), string(id)+".json")
			js, err := os.ReadFile(path)
			require.NoError(t, err)
			m, err := e.sealed.Stat(t.Context(), id)
			require.NoError(t, err)
			edited := edit(string(js), m)
			require.NotEqual(t, string(js), edited, "the edit must change the manifest")
			require.NoError(t, os.WriteFile(path, []byte(edited), 0o600))
			requireRefused(t, e, id)
		})
	}
}

// sameSize returns an archive as long as b whose content differs.
func sameSize(t *testing.T, b []byte) []byte {
	t.Helper()
	c := bytes.Clone(b)
	// Rewrite the first entry's name and fix its checksum: still a valid
	// archive, same size, other digest.
	c[0] = 'z'
	tartest.Checksum(c[:512])
	return c
}

func TestMalformedCheckpointIsRefused(t *testing.T) {
	e := setup(t)
	cases := tartest.Malformed()
	require.GreaterOrEqual(t, len(cases), 10)
	for name, stream := range cases {
		t.Run(name, func(t *testing.T) {
			// An authentic manifest with the stream's true digest: only
			// the archive itself is wrong.
			id := resign(t, e, stream, nil)
			requireRefused(t, e, id)
		})
	}
}

// TestSymlinkChainCheckpoint: a tool that builds an escaping chain of links
// cannot have it checkpointed, and a restored one cannot bring it in.
func TestSymlinkChainCheckpoint(t *testing.T) {
	e := setup(t)
	for name, script := range map[string]string{
		"b -> . and d -> b/..": "ln -s . b && ln -s b/.. d",
		"deep chain":           "mkdir -p x && ln -s . x/b && ln -s b/b/../.. x/d",
		"dot dot after a name": "mkdir -p y && ln -s ./z/../.. y/l",
	} {
		t.Run(name, func(t *testing.T) {
			x, _ := e.provision(t, nil)
			e.sh(t, x.ExecutionID, "set -e; echo keep > keep.txt; "+script)
			before, err := os.ReadDir(e.store.Dir())
			require.NoError(t, err)
			_, err = e.host.Checkpoint(t.Context(), x.ExecutionID, exechost.CheckpointRequest{})
			require.ErrorIs(t, err, exechost.ErrPolicy)
			require.ErrorContains(t, err, "symlink")
			after, err := os.ReadDir(e.store.Dir())
			require.NoError(t, err)
			require.Equal(t, len(before), len(after), "nothing is stored")
		})
	}
	t.Run("import", func(t *testing.T) {
		id := resign(t, e, tartest.Build(
			tartest.Entry{Name: "b", Type: tar.TypeSymlink, Link: "."},
			tartest.Entry{Name: "d", Type: tar.TypeSymlink, Link: "b/.."}), nil)
		requireRefused(t, e, id)
	})
}
