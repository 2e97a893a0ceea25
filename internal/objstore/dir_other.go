//go:build !linux

package objstore

// renameNoReplace renames old to name in the directory dfd unless name
// exists (EEXIST); without renameat2 it is link + unlink.
func renameNoReplace(dfd int, old, name string) error { return linkNoReplace(dfd, old, name) }
