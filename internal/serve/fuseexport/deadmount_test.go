package fuseexport

import (
	"syscall"
	"testing"
)

// TestDeadMountEIOOnlyOnFUSE: an EIO counts as a dead FUSE mount only on a
// FUSE mount point; ENOTCONN and ECONNABORTED count anywhere.
func TestDeadMountEIOOnlyOnFUSE(t *testing.T) {
	dir := t.TempDir()
	if fuseMountPoint(dir) {
		t.Fatalf("%s is not a FUSE mount point", dir)
	}
	if deadMount(dir, syscall.EIO) {
		t.Error("EIO on a plain directory taken for a dead FUSE mount")
	}
	if !deadMount(dir, syscall.ENOTCONN) || !deadMount(dir, syscall.ECONNABORTED) {
		t.Error("ENOTCONN/ECONNABORTED from stat not taken for a dead mount")
	}
	if deadMount(dir, nil) {
		t.Error("a live directory taken for a dead mount")
	}
}
