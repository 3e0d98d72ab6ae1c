package fuseexport

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"mdtool/internal/serve/export"
	"mdtool/internal/serve/metrics"
)

func TestMountErrors(t *testing.T) {
	m, err := export.NewMem(1<<20, 512, 4096, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"", ".", "..", "a/b", "x\x00", ".go-fuse-epoll-hack"} {
		if _, err := Mount(dir, name, m, Options{}); !errors.Is(err, ErrName) {
			t.Errorf("Mount name %q: %v, want ErrName", name, err)
		}
	}
	f := filepath.Join(dir, "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Mount(f, "disk", m, Options{}); err == nil {
		t.Errorf("Mount on a regular file succeeded")
	}
	if _, err := Mount(filepath.Join(dir, "missing"), "disk", m, Options{}); err == nil {
		t.Errorf("Mount on a missing directory succeeded")
	}
	if _, err := Mount(dir, "disk", badSizes{m}, Options{}); !errors.Is(err, export.ErrBlockSizes) {
		t.Errorf("Mount with bad block sizes: %v", err)
	}
}

type badSizes struct{ *export.Mem }

func (badSizes) BlockSizes() (uint32, uint32, uint32) { return 3, 512, 1 << 20 }

func TestFileAttributes(t *testing.T) {
	requireFUSE(t, false)
	b := newRec(t, 8<<20, 512)
	s := mountT(t, b, Options{Mode: 0o640})

	st, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm() != 0o640 || st.Size() != 8<<20 {
		t.Errorf("stat: mode %v size %d", st.Mode(), st.Size())
	}
	ents, err := os.ReadDir(s.Dir())
	if err != nil || len(ents) != 1 || ents[0].Name() != "disk" || !ents[0].Type().IsRegular() {
		t.Errorf("ReadDir = %v, %v", ents, err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(s.Dir(), &sfs); err != nil || sfs.Bsize != 512 || sfs.Blocks != (8<<20)/512 {
		t.Errorf("statfs: bsize %d blocks %d err %v", sfs.Bsize, sfs.Blocks, err)
	}

	refused := []struct {
		name string
		fn   func() error
		want []syscall.Errno
	}{
		{"truncate", func() error { return os.Truncate(s.Path(), 4096) }, []syscall.Errno{syscall.EPERM}},
		{"truncate to 0 by O_TRUNC", func() error {
			f, err := os.OpenFile(s.Path(), os.O_WRONLY|os.O_TRUNC, 0)
			if err == nil {
				f.Close()
			}
			return err
		}, []syscall.Errno{syscall.EPERM}},
		{"chmod", func() error { return os.Chmod(s.Path(), 0o644) }, []syscall.Errno{syscall.EPERM}},
		{"chown", func() error { return os.Chown(s.Path(), 1, 1) }, []syscall.Errno{syscall.EPERM}},
		{"create", func() error { return os.WriteFile(filepath.Join(s.Dir(), "new"), nil, 0o600) }, []syscall.Errno{syscall.EPERM}},
		{"mkdir", func() error { return os.Mkdir(filepath.Join(s.Dir(), "d"), 0o700) }, []syscall.Errno{syscall.EPERM}},
		{"remove", func() error { return os.Remove(s.Path()) }, []syscall.Errno{syscall.EPERM}},
		{"rename", func() error { return os.Rename(s.Path(), filepath.Join(s.Dir(), "other")) }, []syscall.Errno{syscall.EPERM}},
		{"symlink", func() error { return os.Symlink("disk", filepath.Join(s.Dir(), "l")) }, []syscall.Errno{syscall.EPERM}},
		{"link", func() error { return os.Link(s.Path(), filepath.Join(s.Dir(), "l")) }, []syscall.Errno{syscall.EPERM}},
		{"fallocate extending", func() error { return fallocate(s.Path(), 0, 8<<20, 4096) }, []syscall.Errno{syscall.EFBIG}},
		{"fallocate collapse", func() error { return fallocate(s.Path(), unix.FALLOC_FL_COLLAPSE_RANGE, 0, 4096) }, []syscall.Errno{syscall.EOPNOTSUPP}},
	}
	for _, r := range refused {
		err := r.fn()
		ok := false
		for _, w := range r.want {
			ok = ok || errors.Is(err, w)
		}
		if !ok {
			t.Errorf("%s: %v, want %v", r.name, err, r.want)
		}
	}
	if st, err := os.Stat(s.Path()); err != nil || st.Size() != 8<<20 {
		t.Errorf("size changed: %v %v", st.Size(), err)
	}
	// Allowed no-ops: touch, chmod to the same mode, allocation inside.
	now := time.Now()
	if err := os.Chtimes(s.Path(), now, now); err != nil {
		t.Errorf("utimes: %v", err)
	}
	if err := os.Chmod(s.Path(), 0o640); err != nil {
		t.Errorf("chmod to the current mode: %v", err)
	}
	if err := fallocate(s.Path(), 0, 0, 8<<20); err != nil {
		t.Errorf("fallocate inside the file: %v", err)
	}
	if b.writes.Load()+b.fuaWrites.Load()+b.zeroTrim.Load()+b.zeroKeep.Load() != 0 {
		t.Errorf("refused operations reached the backend")
	}

	// 1 MiB requests arrive whole (max_write, max_read, max_pages).
	f, err := os.OpenFile(s.Path(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := bytes.Repeat([]byte{1}, 1<<20)
	reads := b.readN.Load()
	if _, err := f.WriteAt(p, 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(p, 2<<20); err != nil {
		t.Fatal(err)
	}
	if b.writes.Load() != 1 || b.readN.Load()-reads != 1 || b.largest.Load() != 1<<20 {
		t.Errorf("1 MiB write and read became %d writes and %d reads (largest %d)",
			b.writes.Load(), b.readN.Load()-reads, b.largest.Load())
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err != nil || !bytes.Contains(mi, []byte(" "+s.Dir()+" ")) ||
		!bytes.Contains(mi, []byte("max_read=1048576")) {
		t.Errorf("mountinfo lacks the mount or max_read=1048576 (%v)", err)
	}
}

func fallocate(path string, mode uint32, off, n int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		err = unix.Fallocate(int(f.Fd()), mode, off, n)
		if err != unix.EINTR {
			return err
		}
	}
}

// TestReadWrite compares random aligned and unaligned I/O through the file
// with a model, for a 512-byte and a 4 KiB block backend, and checks the
// backend only ever saw aligned requests.
func TestReadWrite(t *testing.T) {
	requireFUSE(t, false)
	for _, blk := range []uint32{512, 4096} {
		t.Run(map[uint32]string{512: "blk512", 4096: "blk4096"}[blk], func(t *testing.T) {
			const size = 4 << 20
			b := newRec(t, size, blk)
			s := mountT(t, b, Options{})
			f, err := os.OpenFile(s.Path(), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			model := make([]byte, size)
			rng := rand.New(rand.NewPCG(1, uint64(blk)))
			cases := []struct{ off, n int64 }{
				{0, 4096}, {1, 1}, {511, 2}, {4095, 4098}, {size - 1, 1}, {size - 4096, 4096},
				{12345, 1 << 20}, {0, 1 << 20}, {2 << 20, 1<<20 + 512}, {size - 1<<20, 1 << 20},
			}
			for i := 0; i < 200; i++ {
				n := rng.Int64N(300000) + 1
				cases = append(cases, struct{ off, n int64 }{rng.Int64N(size - n), n})
			}
			for _, c := range cases {
				p := make([]byte, c.n)
				for i := range p {
					p[i] = byte(rng.Uint32())
				}
				if n, err := f.WriteAt(p, c.off); err != nil || n != len(p) {
					t.Fatalf("WriteAt(%d, %d) = %d, %v", c.off, c.n, n, err)
				}
				copy(model[c.off:], p)
				ro := rng.Int64N(size)
				rn := min(rng.Int64N(200000)+1, size-ro)
				got := make([]byte, rn)
				if n, err := f.ReadAt(got, ro); err != nil || n != len(got) {
					t.Fatalf("ReadAt(%d, %d) = %d, %v", ro, rn, n, err)
				}
				if !bytes.Equal(got, model[ro:ro+rn]) {
					t.Fatalf("ReadAt(%d, %d) differs from the model", ro, rn)
				}
			}
			all := make([]byte, size)
			if _, err := b.Mem.ReadAt(all, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(all, model) {
				t.Errorf("backend contents differ from the model")
			}
			if n := b.unaligned.Load(); n != 0 {
				t.Errorf("backend got %d unaligned or oversized requests", n)
			}

			// End of file: reads stop, writes are short or refused.
			buf := make([]byte, 8192)
			if n, err := f.ReadAt(buf, size-4096); n != 4096 {
				t.Errorf("read across the end: %d, %v", n, err)
			}
			if n, _ := f.ReadAt(buf, size); n != 0 {
				t.Errorf("read at the end: %d bytes", n)
			}
			if n, err := unix.Pwrite(int(f.Fd()), buf, size-4096); n != 4096 {
				t.Errorf("write across the end: %d, %v", n, err)
			}
			if _, err := unix.Pwrite(int(f.Fd()), buf, size); err != unix.ENOSPC {
				t.Errorf("write at the end: %v, want ENOSPC", err)
			}

			// Punch hole (loop discard): zeroes, may trim; unaligned edges
			// are zeroed by read-modify-write.
			for _, r := range []struct{ off, n int64 }{{1 << 20, 1 << 20}, {100, 10000}, {2<<20 + 7, 3}} {
				trims := b.zeroTrim.Load()
				if err := fallocate(s.Path(), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, r.off, r.n); err != nil {
					t.Fatalf("punch hole %v: %v", r, err)
				}
				clear(model[r.off : r.off+r.n])
				if r.n >= 2*int64(blk) && b.zeroTrim.Load() == trims {
					t.Errorf("punch hole %v did not reach WriteZeroes(mayTrim)", r)
				}
			}
			// ZERO_RANGE: the kernel may not pass it to FUSE servers.
			if err := fallocate(s.Path(), unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, 5<<18, 1<<18); err == nil {
				clear(model[5<<18 : 6<<18])
				if b.zeroKeep.Load() == 0 {
					t.Errorf("zero range did not reach WriteZeroes")
				}
			} else if errors.Is(err, unix.EOPNOTSUPP) {
				t.Logf("this kernel does not pass FALLOC_FL_ZERO_RANGE to FUSE")
			} else {
				t.Errorf("zero range: %v", err)
			}
			if _, err := f.ReadAt(all, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(all[:size-4096], model[:size-4096]) {
				t.Errorf("contents after fallocate differ from the model")
			}
			if n := b.unaligned.Load(); n != 0 {
				t.Errorf("backend got %d unaligned requests", n)
			}
		})
	}
}

func TestDurability(t *testing.T) {
	requireFUSE(t, false)
	b := newRec(t, 1<<20, 512)
	s := mountT(t, b, Options{})
	buf := bytes.Repeat([]byte{0xa5}, 4096)

	f, err := os.OpenFile(s.Path(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if b.writes.Load() != 1 || b.fuaWrites.Load() != 0 {
		t.Errorf("plain write: %d writes %d FUA", b.writes.Load(), b.fuaWrites.Load())
	}
	if b.flushes.Load() != 0 {
		t.Errorf("flush before fsync")
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if b.flushes.Load() != 1 {
		t.Errorf("fsync: %d backend flushes, want 1", b.flushes.Load())
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	if b.flushes.Load() != 2 {
		t.Errorf("fdatasync: %d backend flushes, want 2", b.flushes.Load())
	}
	// RWF_DSYNC on one write of a plain descriptor.
	if _, err := unix.Pwritev2(int(f.Fd()), [][]byte{buf}, 4096, unix.RWF_DSYNC); err != nil {
		t.Fatalf("pwritev2(RWF_DSYNC): %v", err)
	}
	if b.fuaWrites.Load() != 1 {
		t.Errorf("RWF_DSYNC write: %d FUA writes, want 1", b.fuaWrites.Load())
	}
	for i, flag := range []int{os.O_SYNC, unix.O_DSYNC} {
		g, err := os.OpenFile(s.Path(), os.O_RDWR|flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.WriteAt(buf, 8192); err != nil {
			t.Fatal(err)
		}
		// An unaligned synchronous write is FUA too (read-modify-write).
		if _, err := g.WriteAt(buf[:100], 8192+10); err != nil {
			t.Fatal(err)
		}
		g.Close()
		if got := b.fuaWrites.Load(); got != int64(1+2*(i+1)) {
			t.Errorf("flag %#x: %d FUA writes, want %d", flag, got, 1+2*(i+1))
		}
	}
	if b.writes.Load() != 1 {
		t.Errorf("synchronous writes also went through WriteAt: %d", b.writes.Load())
	}
	// close(2) does not flush.
	before := b.flushes.Load()
	g, err := os.Open(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	if b.flushes.Load() != before {
		t.Errorf("close flushed the backend")
	}
}

// TestConcurrentIO runs readers and writers in parallel on one descriptor
// and on several, against a backend that sleeps in every request: requests
// must overlap in the backend (no serialisation in the kernel or the server),
// and every region must hold what its writer wrote.
func TestConcurrentIO(t *testing.T) {
	requireFUSE(t, false)
	const size, workers, region = 16 << 20, 8, 2 << 20
	b := newRec(t, size, 512)
	b.delay = 2 * time.Millisecond
	s := mountT(t, b, Options{})
	shared, err := os.OpenFile(s.Path(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			f := shared
			if w%2 == 1 {
				own, err := os.OpenFile(s.Path(), os.O_RDWR, 0)
				if err != nil {
					errs <- err
					return
				}
				defer own.Close()
				f = own
			}
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			base := int64(w) * region
			model := make([]byte, region)
			for i := 0; i < 60; i++ {
				off := rng.Int64N(region - 70000)
				n := rng.Int64N(65536) + 1
				if i%3 == 0 { // aligned
					off &^= 511
					n = (n + 511) &^ 511
				}
				p := make([]byte, n)
				for j := range p {
					p[j] = byte(rng.Uint32())
				}
				if _, err := f.WriteAt(p, base+off); err != nil {
					errs <- err
					return
				}
				copy(model[off:], p)
				got := make([]byte, n)
				if _, err := f.ReadAt(got, base+off); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, p) {
					errs <- errors.New("read back differs")
					return
				}
			}
			got := make([]byte, region)
			if _, err := f.ReadAt(got, base); err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(got, model) {
				errs <- errors.New("region differs from its model")
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	reads, writes := b.maxInFlight()
	t.Logf("max in flight: %d reads, %d writes", reads, writes)
	if reads < 2 || writes < 2 {
		t.Errorf("requests were serialised: at most %d reads and %d writes in flight", reads, writes)
	}
	if n := b.unaligned.Load(); n != 0 {
		t.Errorf("backend got %d unaligned requests", n)
	}
}

func TestReadOnly(t *testing.T) {
	requireFUSE(t, false)
	b := newRec(t, 1<<20, 512)
	if _, err := b.Mem.WriteAt(bytes.Repeat([]byte{7}, 512), 0); err != nil {
		t.Fatal(err)
	}
	s := mountT(t, b, Options{ReadOnly: true})
	if _, err := os.OpenFile(s.Path(), os.O_RDWR, 0); !errors.Is(err, syscall.EROFS) {
		t.Errorf("open O_RDWR: %v, want EROFS", err)
	}
	got, err := os.ReadFile(s.Path())
	if err != nil || len(got) != 1<<20 || got[511] != 7 || got[512] != 0 {
		t.Errorf("ReadFile: %d bytes, %v", len(got), err)
	}
}

func TestUnmount(t *testing.T) {
	requireFUSE(t, false)
	b := newRec(t, 1<<20, 512)
	dir := t.TempDir()
	s, err := Mount(dir, "disk", b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(s.Path())
	if err != nil {
		s.Unmount()
		t.Fatal(err)
	}
	if err := s.Unmount(); err == nil {
		t.Errorf("Unmount with the file open succeeded")
	}
	f.Close()
	unmountT(t, s)
	waited := make(chan struct{})
	go func() { s.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after Unmount")
	}
	if err := s.Unmount(); err != nil {
		t.Errorf("second Unmount: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "disk")); err == nil {
		t.Errorf("file still visible after Unmount")
	}
}

func TestMetrics(t *testing.T) {
	requireFUSE(t, false)
	reg := metrics.NewRegistry()
	ma := metrics.NewArray(reg, "fuse0")
	b := newRec(t, 1<<20, 512)
	s := mountT(t, b, Options{Metrics: ma})
	f, err := os.OpenFile(s.Path(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 8192), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := fallocate(s.Path(), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 4096); err != nil {
		t.Fatal(err)
	}
	text := string(reg.AppendText(nil))
	for _, want := range []string{
		`mdtool_io_requests_total{array="fuse0",op="write"} 1`,
		`mdtool_io_bytes_total{array="fuse0",op="write"} 8192`,
		`mdtool_io_requests_total{array="fuse0",op="read"} 1`,
		`mdtool_io_bytes_total{array="fuse0",op="read"} 4096`,
		`mdtool_io_requests_total{array="fuse0",op="flush"} 1`,
		`mdtool_io_bytes_total{array="fuse0",op="discard"} 4096`,
	} {
		if !bytes.Contains([]byte(text), []byte(want+"\n")) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
