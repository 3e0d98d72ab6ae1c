package cmd

import (
	"testing"

	"mdtool/internal/daemon"
)

// md_NAME (mdadm's kernel name under CREATE names=yes) finds the running
// array /dev/md/NAME, and nothing when no such array runs.
func TestNamedKernelAlias(t *testing.T) {
	dir := t.TempDir()
	if _, ok := namedKernelAlias(dir, "md_linear"); ok {
		t.Fatal("md_linear resolved with no array running")
	}
	lock, err := daemon.AcquireLock(daemon.PathsFor(dir, "linear"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	for _, dev := range []string{"md_linear", "/dev/md_linear"} {
		if n, ok := namedKernelAlias(dir, dev); !ok || n != "linear" {
			t.Errorf("%s: got %q, %v; want linear", dev, n, ok)
		}
	}
	for _, dev := range []string{"md_raid0", "linear", "/dev/md/md_linear", "md_"} {
		if n, ok := namedKernelAlias(dir, dev); ok {
			t.Errorf("%s resolved to %q", dev, n)
		}
	}
}
