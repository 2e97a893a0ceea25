package hosttest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/exechost/gitsource"
)

// Encode is the canonical byte form of a set of files (sorted by path): what
// a Fake checkpoint's SizeBytes and SHA256 are computed over, and what
// tests can search for leaked content.
func Encode(files map[string]File) []byte {
	var b bytes.Buffer
	for _, p := range slices.Sorted(maps.Keys(files)) {
		f := files[p]
		fmt.Fprintf(&b, "%s\x00%o\x00%d\x00", p, f.Mode.Perm(), len(f.Data))
		if f.Symlink != "" {
			fmt.Fprintf(&b, "->%s\x00", f.Symlink)
		}
		b.Write(f.Data)
	}
	return b.Bytes()
}

func digestFiles(files map[string]File) (size int64, sum string) {
	b := Encode(files)
	h := sha256.Sum256(b)
	return int64(len(b)), hex.EncodeToString(h[:])
}

// gitFiles is the default git import: the regular files of one commit,
// through gitsource like the Docker host (same roots, revision rule, budget;
// no worktree, no .git). Symlinks and empty directories are skipped; the
// Fake has only regular files.
func gitFiles(ctx context.Context, im *gitsource.Importer, src exechost.GitSource, maxBytes int64) (map[string]File, error) {
	tree, err := im.Prepare(ctx, src, maxBytes)
	if err != nil {
		return nil, err
	}
	rc, err := tree.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	files := map[string]File{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		p, err := Clean(h.Name)
		if err != nil {
			return nil, &exechost.PolicyError{Field: "workspace.git", Reason: err.Error()}
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[p] = File{Data: data, Mode: fs.FileMode(h.Mode).Perm()}
	}
}
