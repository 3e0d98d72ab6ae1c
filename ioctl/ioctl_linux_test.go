//go:build linux

package ioctl

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestDevNumbers(t *testing.T) {
	tests := []struct {
		major, minor uint32
		dev          uint64
	}{
		{8, 0, 0x800},
		{7, 5, 0x705},
		{9, 127, 0x97f},
		{259, 0, 0x10300},
		{8, 300, 0x10082c},
		{4095, 1 << 20, 0x1000fff00},
		{0x12345, 0xabcdef, 0x1200abcd345ef},
	}
	for _, tt := range tests {
		if got := Mkdev(tt.major, tt.minor); got != tt.dev {
			t.Errorf("Mkdev(%d, %d) = %#x, want %#x", tt.major, tt.minor, got, tt.dev)
		}
		if got := unix.Mkdev(tt.major, tt.minor); got != tt.dev {
			t.Errorf("unix.Mkdev(%d, %d) = %#x, want %#x (test table wrong?)", tt.major, tt.minor, got, tt.dev)
		}
		if Major(tt.dev) != tt.major || Minor(tt.dev) != tt.minor {
			t.Errorf("Major/Minor(%#x) = %d:%d, want %d:%d", tt.dev, Major(tt.dev), Minor(tt.dev), tt.major, tt.minor)
		}
	}
}

func TestFileGeometry(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int64{0, 4096, 1 << 20, 1<<20 + 100, 5 << 30} {
		p := filepath.Join(dir, "img")
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		g, err := GetGeometry(f)
		f.Close()
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		want := Geometry{Size: uint64(size), LogicalBlockSize: 512, PhysicalBlockSize: 4096}
		if g != want {
			t.Errorf("size %d: got %+v, want %+v", size, g, want)
		}
		if g.Sectors() != uint64(size)/512 {
			t.Errorf("Sectors() = %d, want %d", g.Sectors(), size/512)
		}
	}
}

func TestGeometryNotBlockOrFile(t *testing.T) {
	f, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := GetGeometry(f); err == nil || !strings.Contains(err.Error(), "not a block device") {
		t.Fatalf("GetGeometry(/dev/null) err = %v, want 'not a block device'", err)
	}
	d, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := GetGeometry(d); err == nil {
		t.Fatal("GetGeometry(directory) succeeded")
	}
}

func u32(v uint32) *uint32 { return &v }
func u64(v uint64) *uint64 { return &v }
func boolp(v bool) *bool   { return &v }

func TestOverrideProgram(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "d.img")
	if err := os.WriteFile(p, make([]byte, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	geom := func() Geometry {
		t.Helper()
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		g, err := GetGeometry(f)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	t.Cleanup(func() { SetOverride("*", Override{}); SetOverride(p, Override{}) })
	if g := geom(); g.LogicalBlockSize != 512 || g.PhysicalBlockSize != 4096 || g.IOOpt != 0 || g.Size != 8192 {
		t.Errorf("no override: got %+v", g)
	}
	SetOverride("*", Override{IOOpt: u32(65536), Rotational: boolp(true)})
	if g := geom(); g.IOOpt != 65536 || !g.Rotational || g.LogicalBlockSize != 512 {
		t.Errorf("wildcard override: got %+v", g)
	}
	SetOverride(p, Override{LogicalBlockSize: u32(4096), PhysicalBlockSize: u32(4096)})
	if g := geom(); g.LogicalBlockSize != 4096 || g.PhysicalBlockSize != 4096 || g.IOOpt != 0 || g.Size != 8192 {
		t.Errorf("override for the path should win over \"*\": got %+v", g)
	}
	SetOverride(p, Override{Size: u64(4096)})
	if g := geom(); g.Size != 4096 || g.IOOpt != 0 || g.LogicalBlockSize != 512 {
		t.Errorf("exact override: got %+v", g)
	}
	SetOverride(p, Override{})
	if g := geom(); g.Size != 8192 || g.IOOpt != 65536 {
		t.Errorf("after removing the exact override: got %+v", g)
	}
}

func TestFileZeroDiscard(t *testing.T) {
	p := filepath.Join(t.TempDir(), "z.img")
	data := bytes.Repeat([]byte{0xa5}, 64<<10)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenExclusive(p, true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := ZeroOut(f, 4096, 8192); err != nil {
		t.Fatal(err)
	}
	if err := Discard(f, 32768, 4096); err != nil {
		t.Fatal(err)
	}
	if err := FlushBuffers(f); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range got {
		zero := (i >= 4096 && i < 12288) || (i >= 32768 && i < 36864)
		if zero && b != 0 || !zero && b != 0xa5 {
			t.Fatalf("byte %d = %#x after ZeroOut/Discard", i, b)
		}
	}
	if len(got) != len(data) {
		t.Fatalf("file size changed to %d", len(got))
	}
}

// requireLoop returns a loop device over a new sparse file of size bytes,
// detached at the end of the test. Loop devices need root and losetup;
// without them the test is skipped, except under CI where it fails.
func requireLoop(t *testing.T, size int64, sectorSize int) string {
	t.Helper()
	need := func(why string) {
		if os.Getenv("CI") != "" {
			t.Fatalf("loop device test cannot run in CI: %s", why)
		}
		t.Skipf("loop device test needs %s", why)
	}
	if os.Geteuid() != 0 {
		need("root")
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		need("losetup")
	}
	img := filepath.Join(t.TempDir(), "loop.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	args := []string{"--find", "--show"}
	if sectorSize != 0 {
		args = append(args, "--sector-size", strconv.Itoa(sectorSize))
	}
	out, err := exec.Command("losetup", append(args, img)...).CombinedOutput()
	if err != nil {
		need("a working losetup: " + strings.TrimSpace(string(out)))
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v %s", dev, err, out)
		}
	})
	return dev
}

func TestLoopGeometry(t *testing.T) {
	tests := []struct {
		size       int64
		sectorSize int
		wantLBS    uint32
	}{
		{8 << 20, 0, 512},
		{8<<20 + 512, 0, 512},
		{16 << 20, 4096, 4096},
	}
	for _, tt := range tests {
		dev := requireLoop(t, tt.size, tt.sectorSize)
		f, err := OpenExclusive(dev, false)
		if err != nil {
			t.Fatal(err)
		}
		g, err := GetGeometry(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !g.IsBlockDevice || g.Size != uint64(tt.size) || g.LogicalBlockSize != tt.wantLBS {
			t.Errorf("%s (%d bytes, sector size %d): got %+v", dev, tt.size, tt.sectorSize, g)
		}
		if g.PhysicalBlockSize < g.LogicalBlockSize {
			t.Errorf("%s: physical block size %d < logical %d", dev, g.PhysicalBlockSize, g.LogicalBlockSize)
		}
		if Major(g.Dev) != 7 {
			t.Errorf("%s: major %d, want 7 (loop)", dev, Major(g.Dev))
		}
		rdev, err := DeviceNumber(dev)
		if err != nil || rdev != g.Dev {
			t.Errorf("DeviceNumber(%s) = %#x, %v; want %#x", dev, rdev, err, g.Dev)
		}
		// sysfs agrees with the ioctls.
		sys := sysfsDir(g.Dev)
		if n, err := readSysfsUint(filepath.Join(sys, "size")); err != nil || n*512 != g.Size {
			t.Errorf("sysfs size %d (%v), ioctl %d", n*512, err, g.Size)
		}
		if n, err := readSysfsUint(filepath.Join(sys, "queue", "logical_block_size")); err != nil || uint32(n) != g.LogicalBlockSize {
			t.Errorf("sysfs logical_block_size %d (%v), ioctl %d", n, err, g.LogicalBlockSize)
		}
	}
}

func TestLoopOverride(t *testing.T) {
	dev := requireLoop(t, 8<<20, 0)
	SetOverride(dev, Override{LogicalBlockSize: u32(4096), PhysicalBlockSize: u32(4096), IOOpt: u32(1048576)})
	t.Cleanup(func() { SetOverride(dev, Override{}) })
	f, err := OpenExclusive(dev, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g, err := GetGeometry(f)
	if err != nil {
		t.Fatal(err)
	}
	if g.LogicalBlockSize != 4096 || g.PhysicalBlockSize != 4096 || g.IOOpt != 1048576 || g.Size != 8<<20 {
		t.Errorf("override on %s: got %+v", dev, g)
	}
}

func TestOpenExclusiveBusy(t *testing.T) {
	dev := requireLoop(t, 8<<20, 0)
	first, err := OpenExclusive(dev, true)
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenExclusive(dev, false)
	if err == nil {
		first.Close()
		t.Fatal("second exclusive open succeeded while the first is held")
	}
	if !errors.Is(err, ErrBusy) || !errors.Is(err, syscall.EBUSY) {
		t.Errorf("err = %v (%T), want ErrBusy and EBUSY", err, err)
	}
	var be *BusyError
	if !errors.As(err, &be) || be.Path != dev || !strings.Contains(err.Error(), dev) {
		t.Errorf("err = %v, want *BusyError naming %s", err, dev)
	}
	// A plain (non-exclusive) open still works: O_EXCL only excludes
	// other exclusive openers.
	plain, err := os.Open(dev)
	if err != nil {
		t.Errorf("plain open while held exclusively: %v", err)
	} else {
		plain.Close()
	}
	first.Close()
	again, err := OpenExclusive(dev, false)
	if err != nil {
		t.Fatalf("exclusive open after release: %v", err)
	}
	again.Close()
}

func TestOpenExclusiveFileLocked(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.img")
	if err := os.WriteFile(p, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := OpenExclusive(p, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if b, err := OpenExclusive(p, true); err == nil || !errors.Is(err, ErrBusy) {
		if b != nil {
			b.Close()
		}
		t.Fatalf("second exclusive open of a locked image file: err = %v, want ErrBusy", err)
	}
	if _, err := OpenExclusive(filepath.Join(t.TempDir(), "none"), false); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want ErrNotExist", err)
	}
}

func TestLoopZeroOutAndFlush(t *testing.T) {
	dev := requireLoop(t, 8<<20, 0)
	f, err := OpenExclusive(dev, true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pattern := bytes.Repeat([]byte{0x5a}, 64<<10)
	if _, err := f.WriteAt(pattern, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := ZeroOut(f, 8192, 16384); err != nil {
		t.Fatal(err)
	}
	if err := FlushBuffers(f); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(pattern))
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	for i, b := range got {
		zero := i >= 8192 && i < 24576
		if zero && b != 0 || !zero && b != 0x5a {
			t.Fatalf("byte %d = %#x after BLKZEROOUT", i, b)
		}
	}
	if err := ZeroOut(f, 1, 512); err == nil {
		t.Error("BLKZEROOUT at an unaligned offset succeeded")
	}
}
