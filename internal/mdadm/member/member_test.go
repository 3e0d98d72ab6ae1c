package member

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"mdtool/internal/fixture"
	"mdtool/ioctl"
)

// TestFindV1OnKernelFixtures: members the kernel and mdadm made, for every
// metadata version, are found at the offset and minor mdadm reports.
func TestFindV1OnKernelFixtures(t *testing.T) {
	root, err := fixture.Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		minor int
	}{{"raid1-v1.0-bitmap", 0}, {"raid1-v1.1-bitmap", 1}, {"raid1-v1.2-named", 2}, {"raid5-bitmap-crash", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := fixture.LoadCase(filepath.Join(root, tc.name))
			if err != nil {
				t.Fatal(err)
			}
			paths, err := c.Materialize(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range paths {
				m, err := Open(p, ReadOnly)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				v, err := m.LoadV1(-1)
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				if v.Minor != tc.minor || int64(v.Offset)*512 != c.Members[i].Super.Offset {
					t.Errorf("%s: minor %d at byte %d, want minor %d at %d", p, v.Minor, v.Offset*512, tc.minor, c.Members[i].Super.Offset)
				}
				if v.Err != nil {
					t.Errorf("%s: kernel-written superblock does not parse cleanly: %v", p, v.Err)
				}
				if off, ok := v.BitmapOffset(); ok {
					h, bits, err := m.ReadBitmap(off, 0)
					if err != nil || h == nil || len(bits) == 0 {
						t.Errorf("%s: bitmap at %d: %v", p, off, err)
					}
				}
			}
		})
	}
}

// TestEraseSuperblocks: every superblock on the device goes, like mdadm's
// Kill loop, and nothing else is touched.
func TestEraseSuperblocks(t *testing.T) {
	root, err := fixture.Dir()
	if err != nil {
		t.Fatal(err)
	}
	c, err := fixture.LoadCase(filepath.Join(root, "raid1-v1.0-bitmap"))
	if err != nil {
		t.Fatal(err)
	}
	paths, err := c.Materialize(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(paths[0])
	m, err := Open(paths[0], ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	n, err := m.EraseSuperblocks()
	if err != nil || n != 1 {
		t.Fatalf("EraseSuperblocks = %d, %v; want 1, nil", n, err)
	}
	if _, err := m.LoadV1(-1); !errors.Is(err, ErrNoSuperblock) {
		t.Errorf("superblock still found after erase: %v", err)
	}
	after, _ := os.ReadFile(paths[0])
	off := c.Members[0].Super.Offset
	if !bytes.Equal(before[:off], after[:off]) || !bytes.Equal(before[off+512:], after[off+512:]) {
		t.Errorf("erase touched bytes outside the 512-byte superblock")
	}
}

// TestWriteAllReadModifyWrite: on a member with 4 KiB logical blocks an
// unaligned 512-byte metadata write keeps the rest of its block.
func TestWriteAllReadModifyWrite(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d.img")
	data := bytes.Repeat([]byte{0xab}, 64<<10)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	lbs := uint32(4096)
	ioctl.SetOverride(p, ioctl.Override{LogicalBlockSize: &lbs})
	m, err := Open(p, ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	if m.Geom.LogicalBlockSize != 4096 {
		t.Fatalf("override not applied: lbs %d", m.Geom.LogicalBlockSize)
	}
	if err := m.WriteAll([]Write{{Offset: 4096 + 512, Data: make([]byte, 512)}}); err != nil {
		t.Fatal(err)
	}
	m.Close()
	got, _ := os.ReadFile(p)
	want := append([]byte(nil), data...)
	copy(want[4096+512:4096+1024], make([]byte, 512))
	if !bytes.Equal(got, want) {
		t.Errorf("read-modify-write changed bytes outside the write")
	}
}
