package secrets

import (
	"fmt"
	"os"
	"syscall"
)

// Filesystems that are kernel interfaces, wherever they are mounted (a
// root that is a bind mount of /proc must not serve /proc/self/environ).
var kernelFS = map[int64]string{
	0x9fa0:     "proc",
	0x62656572: "sysfs",
	0x1cd1:     "devpts",
	0x64626720: "debugfs",
	0x74726163: "tracefs",
	0x73636673: "securityfs",
	0x27e0eb:   "cgroup",
	0x63677270: "cgroup2",
	0xcafe4a11: "bpf",
	0x6165676c: "pstorefs",
	0xde5e81e4: "efivarfs",
}

func checkFilesystem(f *os.File) error {
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("statfs: %v", err)
	}
	if name, bad := kernelFS[int64(st.Type)]; bad {
		return fmt.Errorf("the file is on a %s filesystem, never a secret source", name)
	}
	return nil
}
