package fuseexport

import (
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mdtool/internal/serve/export"
)

// requireFUSE fails (CI set) or skips the test when this machine cannot
// mount FUSE, or with loop also cannot make loop devices and ext4.
func requireFUSE(t *testing.T, loop bool) {
	t.Helper()
	var missing []string
	if _, err := os.Stat("/dev/fuse"); err != nil {
		missing = append(missing, "/dev/fuse")
	}
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			missing = append(missing, "root or fusermount3")
		}
	}
	if loop {
		if os.Geteuid() != 0 {
			missing = append(missing, "root (for loop devices)")
		}
		if _, err := os.Stat("/dev/loop-control"); err != nil {
			missing = append(missing, "/dev/loop-control")
		}
		for _, tool := range []string{"losetup", "mkfs.ext4", "fsck.ext4", "mount", "umount", "fstrim"} {
			if _, err := exec.LookPath(tool); err != nil {
				missing = append(missing, tool)
			}
		}
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI needs %v", missing)
	}
	t.Skipf("missing %v (set CI to make this a failure)", missing)
}

// recBackend records what reaches a Backend; with delay every read and
// write sleeps, so concurrent requests overlap.
type recBackend struct {
	*export.Mem
	delay time.Duration

	readN, writes, fuaWrites, flushes atomic.Int64
	largest                           atomic.Int64 // largest read or write
	zeroTrim, zeroKeep                atomic.Int64
	discards                          atomic.Int64

	mu                  sync.Mutex
	reads, inWrites     int
	maxReads, maxWrites int
	unaligned           atomic.Int64 // requests the Backend contract forbids
}

func newRec(t *testing.T, size int64, blk uint32) *recBackend {
	t.Helper()
	m, err := export.NewMem(size, blk, max(blk, 4096), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return &recBackend{Mem: m}
}

func (r *recBackend) check(off, n int64) {
	for {
		l := r.largest.Load()
		if n <= l || r.largest.CompareAndSwap(l, n) {
			break
		}
	}
	blk, _, max := r.BlockSizes()
	if off%int64(blk) != 0 || n%int64(blk) != 0 || n > int64(max) || off < 0 || off+n > r.Size() {
		r.unaligned.Add(1)
	}
}

func (r *recBackend) enter(write bool) {
	r.mu.Lock()
	if write {
		r.inWrites++
		r.maxWrites = max(r.maxWrites, r.inWrites)
	} else {
		r.reads++
		r.maxReads = max(r.maxReads, r.reads)
	}
	r.mu.Unlock()
	if r.delay > 0 {
		time.Sleep(r.delay)
	}
}

func (r *recBackend) leave(write bool) {
	r.mu.Lock()
	if write {
		r.inWrites--
	} else {
		r.reads--
	}
	r.mu.Unlock()
}

func (r *recBackend) ReadAt(p []byte, off int64) (int, error) {
	r.check(off, int64(len(p)))
	r.readN.Add(1)
	r.enter(false)
	defer r.leave(false)
	return r.Mem.ReadAt(p, off)
}

func (r *recBackend) WriteAt(p []byte, off int64) (int, error) {
	r.check(off, int64(len(p)))
	r.writes.Add(1)
	r.enter(true)
	defer r.leave(true)
	return r.Mem.WriteAt(p, off)
}

func (r *recBackend) WriteAtFUA(p []byte, off int64) (int, error) {
	r.check(off, int64(len(p)))
	r.fuaWrites.Add(1)
	r.enter(true)
	defer r.leave(true)
	return r.Mem.WriteAtFUA(p, off)
}

func (r *recBackend) Flush() error {
	r.flushes.Add(1)
	return r.Mem.Flush()
}

func (r *recBackend) Discard(off, length int64) error {
	r.discards.Add(1)
	return r.Mem.Discard(off, length)
}

func (r *recBackend) WriteZeroes(off, length int64, mayTrim bool) error {
	blk, _, _ := r.BlockSizes()
	if off%int64(blk) != 0 || length%int64(blk) != 0 || off+length > r.Size() {
		r.unaligned.Add(1)
	}
	if mayTrim {
		r.zeroTrim.Add(1)
	} else {
		r.zeroKeep.Add(1)
	}
	return r.Mem.WriteZeroes(off, length, mayTrim)
}

func (r *recBackend) maxInFlight() (reads, writes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxReads, r.maxWrites
}

// mountT mounts b in a temporary directory and unmounts it at cleanup.
func mountT(t *testing.T, b export.Backend, opts Options) *Server {
	t.Helper()
	dir := t.TempDir()
	s, err := Mount(dir, "disk", b, opts)
	if err != nil {
		t.Fatalf("Mount: %v", err)
	}
	t.Cleanup(func() { unmountT(t, s) })
	return s
}

// unmountT unmounts, retrying while the kernel finishes releasing the file,
// and detaches lazily as a last resort so no mount outlives the test.
func unmountT(t *testing.T, s *Server) {
	t.Helper()
	var err error
	for i := 0; i < 20; i++ {
		if err = s.Unmount(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("Unmount %s: %v; detaching lazily", s.Dir(), err)
	exec.Command("umount", "-l", s.Dir()).Run()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		t.Errorf("server of %s still running", s.Dir())
	}
}
