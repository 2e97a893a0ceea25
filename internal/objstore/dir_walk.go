package objstore

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"
)

// List implements Store. It walks only the part of the tree the prefix can
// match, never follows symlinks, and returns plain files whose relative
// path is a valid key: temp files, stray entries someone else put there and
// non-regular files are not objects.
func (d *Dir) List(ctx context.Context, prefix string) ([]Info, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	start := "."
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = prefix[:i]
	}
	var out []Info
	err := fs.WalkDir(d.root.FS(), start, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			// No directory for the prefix (or an object where one would be): nothing matches.
			if p == start && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
				return fs.SkipAll
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if de.IsDir() {
			if p != start && !strings.HasPrefix(p+"/", prefix) && !strings.HasPrefix(prefix, p+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if !de.Type().IsRegular() || !strings.HasPrefix(p, prefix) || CheckKey(p) != nil {
			return nil
		}
		fi, err := de.Info()
		if errors.Is(err, fs.ErrNotExist) { // deleted while we walked
			return nil
		}
		if err != nil {
			return err
		}
		if checkInfo(fi) != nil {
			return nil
		}
		out = append(out, Info{Key: p, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, d.err("list", prefix, err)
	}
	sortInfos(out)
	return out, nil
}

// SweepTemp removes the temp files of writers that died mid-Put (older than
// TempMaxAge) anywhere in the tree and returns how many it removed. The
// worker calls it at start; a live writer's temp file is younger.
func (d *Dir) SweepTemp(ctx context.Context) (int, error) {
	cutoff := time.Now().Add(-TempMaxAge)
	removed := 0
	err := fs.WalkDir(d.root.FS(), ".", func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if de.IsDir() || !isTemp(de.Name()) {
			return nil
		}
		fi, err := de.Info()
		if err != nil || fi.ModTime().After(cutoff) {
			return nil
		}
		if err := d.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		removed++
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return removed, ctx.Err()
		}
		return removed, d.err("sweep", "", err)
	}
	return removed, nil
}

// isTemp reports whether a file name is one of Put's temp files.
func isTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempMarker)
}

// DeletePrefix implements Store: the listed objects, then every directory
// under prefix (and prefix's own) left empty, deepest first. A directory
// that is not empty (a writer put something there meanwhile) stays.
func (d *Dir) DeletePrefix(ctx context.Context, prefix string) ([]Info, error) {
	if err := checkSegmentPrefix(prefix); err != nil {
		return nil, err
	}
	infos, err := deleteListed(ctx, d, prefix)
	if err != nil {
		return infos, err
	}
	base := strings.TrimSuffix(prefix, "/")
	dirs := map[string]bool{base: true}
	for _, in := range infos {
		for p := path.Dir(in.Key); strings.HasPrefix(p, base+"/"); p = path.Dir(p) {
			dirs[p] = true
		}
	}
	ordered := make([]string, 0, len(dirs))
	for p := range dirs {
		ordered = append(ordered, p)
	}
	// Deepest first, so a parent is tried after its children.
	sort.Slice(ordered, func(i, j int) bool { return strings.Count(ordered[i], "/") > strings.Count(ordered[j], "/") })
	for _, p := range ordered {
		// Only directories: "a/b" may be an object while "a/b/" is asked.
		if fi, err := d.root.Lstat(p); err != nil || !fi.IsDir() {
			continue
		}
		if err := d.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) &&
			!errors.Is(err, syscall.EEXIST) && !errors.Is(err, syscall.ENOTDIR) {
			return infos, d.err("delete", p, err)
		}
	}
	return infos, nil
}
