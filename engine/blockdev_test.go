package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"mdtool/internal/mdadm/plan"
)

// loopImages creates the member images of s as files (superblocks written
// as planned) and attaches each to a loop device with the given sector
// size. Loop devices need root and losetup; without them the test is
// skipped, except under CI where it fails.
func loopImages(t *testing.T, s spec, sectorSize int) []string {
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
	dir := t.TempDir()
	var pdevs []plan.Device
	var imgs []string
	for i := 0; i < s.n; i++ {
		img := filepath.Join(dir, fmt.Sprintf("m%d.img", i))
		if err := os.WriteFile(img, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(img, s.devSize(i)); err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
		pdevs = append(pdevs, plan.Device{Path: img, Sectors: uint64(s.devSize(i)) >> 9, LogicalBlockSize: uint32(sectorSize)})
	}
	r, err := plan.Plan(plan.Options{MDDevice: "/dev/md0", Level: s.level, Layout: s.layout, RaidDevices: s.n,
		ChunkKiB: s.chunkKiB, Homehost: "any", AssumeClean: true, Bitmap: map[bool]string{true: "internal", false: "none"}[s.bitmap],
		Now: time.Unix(1700000000, 0), Rand: rand.NewChaCha8([32]byte{9}), Devices: pdevs})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range r.Members {
		f, err := os.OpenFile(imgs[m.Device], os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range m.Writes {
			if _, err := f.WriteAt(w.Data, w.Offset); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
	var devs []string
	for _, img := range imgs {
		out, err := exec.Command("losetup", "--find", "--show", "--sector-size", strconv.Itoa(sectorSize), img).CombinedOutput()
		if err != nil {
			need("a working losetup: " + strings.TrimSpace(string(out)))
		}
		dev := strings.TrimSpace(string(out))
		t.Cleanup(func() {
			if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
				t.Errorf("losetup -d %s: %v %s", dev, err, out)
			}
		})
		devs = append(devs, dev)
	}
	return devs
}

// TestBlockDevices runs arrays on loop block devices opened with O_DIRECT,
// with 512-byte and 4 KiB logical blocks: geometry, aligned I/O from
// unaligned memory (bounce buffers), flush, FUA, discard and zeroing.
func TestBlockDevices(t *testing.T) {
	for _, tc := range []struct {
		s      spec
		sector int
	}{
		{spec{level: "raid5", n: 4, chunkKiB: 64, devMiB: []int{16}, bitmap: true}, 512},
		{spec{level: "raid6", n: 4, chunkKiB: 64, devMiB: []int{16}}, 4096},
		{spec{level: "raid10", layout: "f2", n: 3, chunkKiB: 64, devMiB: []int{16}, bitmap: true}, 4096},
	} {
		t.Run(fmt.Sprintf("%v-lbs%d", tc.s, tc.sector), func(t *testing.T) {
			paths := loopImages(t, tc.s, tc.sector)
			var devs []Device
			for _, p := range paths {
				d, err := OpenFile(p, FileOptions{Exclusive: true})
				if err != nil {
					t.Fatal(err)
				}
				if g := d.Geometry(); g.LogicalBlock != uint32(tc.sector) || g.Size != tc.s.devSize(0) {
					t.Fatalf("%s: geometry %+v", p, g)
				}
				if !d.direct {
					t.Fatalf("%s not opened with O_DIRECT", p)
				}
				devs = append(devs, d)
			}
			a, err := Open(devs, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if a.BlockSize() != int64(tc.sector) {
				t.Errorf("array block size %d, want %d", a.BlockSize(), tc.sector)
			}
			if _, err := a.WriteAt(make([]byte, 512), 512); tc.sector == 4096 && err != ErrAlignment {
				t.Errorf("512-byte write on a 4 KiB array: %v, want ErrAlignment", err)
			}
			m := newModel(a.Size())
			workload(t, a, m, 11, 40)
			// a write from a buffer that is not aligned in memory
			raw := make([]byte, 3*a.IOOpt()+1)
			p := raw[1:]
			fillPattern(newRand(12), p)
			mustWrite(t, a, m, p, a.IOOpt())
			if _, err := a.WriteAtFUA(p[:4096], 8192); err != nil {
				t.Fatal(err)
			}
			m.write(p[:4096], 8192)
			if err := a.WriteZeroes(0, 2*a.IOOpt()); err != nil {
				t.Fatal(err)
			}
			m.write(make([]byte, 2*a.IOOpt()), 0)
			if err := a.Flush(); err != nil {
				t.Fatal(err)
			}
			checkContent(t, a, m)
			if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
				t.Errorf("check: %d %v", mm, err)
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			// reopen read-only through the page cache (no O_DIRECT)
			devs = devs[:0]
			for _, p := range paths {
				d, err := OpenFile(p, FileOptions{ReadOnly: true, Buffered: true})
				if err != nil {
					t.Fatal(err)
				}
				devs = append(devs, d)
			}
			o := DefaultOptions()
			o.ReadOnly = true
			b, err := Open(devs, o)
			if err != nil {
				t.Fatal(err)
			}
			checkContent(t, b, m)
			b.Close()
		})
	}
}
