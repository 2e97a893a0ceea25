//go:build integration

package objstore_test

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/objstore"
)

// TestDirFullDisk: a real full file system (a 1 MiB tmpfs) fails a Put as
// one clear store outage, leaves no temp file, and keeps the objects that
// were there. Needs root (mount); skipped without.
func TestDirFullDisk(t *testing.T) {
	root := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", root).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", root).Run() })
	d, err := objstore.NewDir(root)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })

	_, err = d.Put(t.Context(), "cp/small.json", strings.NewReader("{}"), objstore.PutOptions{})
	require.NoError(t, err)
	_, err = d.Put(t.Context(), "cp/big.tar", io.LimitReader(zeros{}, 4<<20), objstore.PutOptions{})
	requireUnavailable(t, err, "no space left on device")
	require.Equal(t, "object store dir "+root+" unavailable: put cp/big.tar: no space left on device", err.Error())

	ents, err := os.ReadDir(root + "/cp")
	require.NoError(t, err)
	require.Len(t, ents, 1, "no temp file left behind")
	rc, err := d.Get(t.Context(), "cp/small.json")
	require.NoError(t, err)
	rc.Close()
}
