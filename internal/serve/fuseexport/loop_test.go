package fuseexport

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// run runs a command and fails the test with its output if it fails.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// mounted reports whether dir is a mount point.
func mounted(dir string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && fields[4] == dir {
			return true
		}
	}
	return false
}

// loopDev is a loop device attached to a file; detach is idempotent and
// registered as a cleanup.
type loopDev struct {
	dev      string
	detached bool
}

func attachLoop(t *testing.T, file string) *loopDev {
	t.Helper()
	out, err := exec.Command("losetup", "--find", "--show", "--direct-io=on", file).CombinedOutput()
	if err != nil {
		t.Logf("losetup --direct-io=on refused (%v: %s); attaching with buffered I/O", err, strings.TrimSpace(string(out)))
		out, err = exec.Command("losetup", "--find", "--show", file).CombinedOutput()
		if err != nil {
			t.Fatalf("losetup %s: %v\n%s", file, err, out)
		}
	}
	l := &loopDev{dev: strings.TrimSpace(string(out))}
	if !strings.HasPrefix(l.dev, "/dev/loop") {
		t.Fatalf("losetup printed %q", l.dev)
	}
	dio, _ := os.ReadFile(filepath.Join("/sys/block", filepath.Base(l.dev), "loop/dio"))
	t.Logf("%s on %s, direct I/O %s", l.dev, file, strings.TrimSpace(string(dio)))
	t.Cleanup(func() { l.detach(t) })
	return l
}

func (l *loopDev) detach(t *testing.T) {
	t.Helper()
	if l.detached {
		return
	}
	var out []byte
	var err error
	for i := 0; i < 50; i++ {
		if out, err = exec.Command("losetup", "-d", l.dev).CombinedOutput(); err == nil {
			l.detached = true
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("losetup -d %s: %v\n%s", l.dev, err, out)
}

// mountExt4 mounts dev on a temporary directory, unmounted at cleanup.
func mountExt4(t *testing.T, dev string) string {
	t.Helper()
	dir := t.TempDir()
	run(t, "mount", "-t", "ext4", dev, dir)
	t.Cleanup(func() { umount(t, dir) })
	return dir
}

func umount(t *testing.T, dir string) {
	t.Helper()
	var out []byte
	var err error
	for i := 0; i < 50 && mounted(dir); i++ {
		if out, err = exec.Command("umount", dir).CombinedOutput(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	if mounted(dir) {
		t.Errorf("umount %s: %v\n%s", dir, err, out)
	}
}

// TestLoopExt4 puts ext4 on a loop device over the FUSE file, writes files,
// checks the file system, then serves the same backend again through a new
// mount and loop device and compares the files.
func TestLoopExt4(t *testing.T) {
	requireFUSE(t, true)
	b := newRec(t, 256<<20, 512)

	// Round 1: mkfs, write, delete one file, fstrim, unmount, fsck.
	s := mountT(t, b, Options{})
	loop := attachLoop(t, s.Path())
	run(t, "mkfs.ext4", "-q", "-F", loop.dev)
	mnt := mountExt4(t, loop.dev)

	rng := rand.New(rand.NewChaCha8([32]byte{'m', 'd', 't', 'o', 'o', 'l'}))
	want := map[string][sha256.Size]byte{}
	total := 0
	for i := 0; i < 24; i++ {
		n := 1 + rng.IntN(3<<20)
		if i%5 == 0 {
			n = 1 + rng.IntN(5000) // small files: unaligned tails
		}
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		name := filepath.Join(fmt.Sprintf("d%d", i%3), fmt.Sprintf("sub%d", i%2), fmt.Sprintf("f%02d", i))
		if err := os.MkdirAll(filepath.Join(mnt, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mnt, name), p, 0o644); err != nil {
			t.Fatal(err)
		}
		want[name] = sha256.Sum256(p)
		total += n
	}
	t.Logf("wrote %d files, %.1f MiB", len(want), float64(total)/(1<<20))
	// A deleted file's blocks are discarded by fstrim: the loop driver
	// punches holes in the FUSE file.
	gone := "d0/sub0/f00"
	if err := os.Remove(filepath.Join(mnt, gone)); err != nil {
		t.Fatal(err)
	}
	delete(want, gone)
	run(t, "sync")
	trims := b.zeroTrim.Load()
	run(t, "fstrim", mnt)
	if b.zeroTrim.Load() == trims {
		t.Errorf("fstrim did not reach the backend")
	}
	flushes := b.flushes.Load()
	umount(t, mnt)
	if b.flushes.Load() == flushes {
		t.Errorf("unmounting ext4 flushed nothing to the backend")
	}
	run(t, "fsck.ext4", "-fn", loop.dev)
	loop.detach(t)
	unmountT(t, s)

	// Round 2: the same backend through a new mount and loop device.
	s2 := mountT(t, b, Options{})
	loop2 := attachLoop(t, s2.Path())
	mnt2 := mountExt4(t, loop2.dev)
	for name, sum := range want {
		p, err := os.ReadFile(filepath.Join(mnt2, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if sha256.Sum256(p) != sum {
			t.Errorf("%s: contents differ after remount", name)
		}
	}
	if _, err := os.Stat(filepath.Join(mnt2, gone)); !os.IsNotExist(err) {
		t.Errorf("deleted file %s: %v", gone, err)
	}
	umount(t, mnt2)
	run(t, "fsck.ext4", "-fn", loop2.dev)
	loop2.detach(t)
	unmountT(t, s2)

	if n := b.unaligned.Load(); n != 0 {
		t.Errorf("backend got %d unaligned requests", n)
	}
	t.Logf("backend: %d writes, %d FUA writes, %d flushes, %d trims, %d zero-ranges",
		b.writes.Load(), b.fuaWrites.Load(), b.flushes.Load(), b.zeroTrim.Load(), b.zeroKeep.Load())
}
