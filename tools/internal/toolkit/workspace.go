package toolkit

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// OpenWorkspace opens the workspace as an os.Root, so every file operation a
// tool makes through it stays inside, whatever path or symlink it is handed.
func (e Env) OpenWorkspace() (*os.Root, error) {
	r, err := os.OpenRoot(e.Workspace)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	return r, nil
}

// CleanRel normalises a workspace-relative path and refuses one that is
// absolute (other than under /workspace/), empty, or climbs out with "..".
func CleanRel(p string) (string, error) {
	orig := p
	p = strings.TrimPrefix(p, "/workspace/")
	if p == "" || strings.HasPrefix(p, "/") {
		return "", BadInput("path %q must be relative to /workspace", orig)
	}
	c := path.Clean(p)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", BadInput("path %q escapes /workspace", orig)
	}
	return c, nil
}

// WriteFile writes data at rel inside root, creating parent directories.
func WriteFile(root *os.Root, rel string, data []byte) error {
	c, err := CleanRel(rel)
	if err != nil {
		return err
	}
	if dir := path.Dir(c); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}
	if err := root.WriteFile(c, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", c, err)
	}
	return nil
}

// ReadFile reads rel inside root.
func ReadFile(root *os.Root, rel string) ([]byte, error) {
	c, err := CleanRel(rel)
	if err != nil {
		return nil, err
	}
	data, err := root.ReadFile(c)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", c, err)
	}
	return data, nil
}

// ListFiles returns the workspace's regular files, slash-separated and sorted.
func ListFiles(root *os.Root) ([]string, error) {
	var files []string
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list workspace: %w", err)
	}
	sort.Strings(files)
	return files, nil
}

// NextName returns prefix-<n>suffix for the lowest n ≥ 1 not yet present in
// dir, so repeated steps in one workspace never overwrite each other.
func NextName(root *os.Root, dir, prefix, suffix string) (string, error) {
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	for n := 1; n < 1_000_000; n++ {
		name := path.Join(dir, fmt.Sprintf("%s%d%s", prefix, n, suffix))
		if _, err := root.Lstat(name); os.IsNotExist(err) {
			return name, nil
		}
	}
	return "", fmt.Errorf("no free name for %s/%s*%s", dir, prefix, suffix)
}
