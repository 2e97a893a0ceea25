package objstore

import "golang.org/x/sys/unix"

// renameNoReplace renames old to name in the directory dfd unless name
// exists (EEXIST): renameat2(RENAME_NOREPLACE) is atomic, so of two writers
// exactly one wins and no reader ever sees a second link. File systems
// without it (EINVAL) fall back to link + unlink.
func renameNoReplace(dfd int, old, name string) error {
	err := unix.Renameat2(dfd, old, dfd, name, unix.RENAME_NOREPLACE)
	if err == unix.EINVAL {
		return linkNoReplace(dfd, old, name)
	}
	return err
}
