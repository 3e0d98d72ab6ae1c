package engine

import (
	"bytes"
	"context"
	"testing"
	"time"

	"mdtool/engine/layout"
)

// fillAll writes a recognisable byte over every member.
func fillAll(t *testing.T, mems []*MemDevice, b byte) {
	t.Helper()
	for _, m := range mems {
		p := bytes.Repeat([]byte{b}, int(m.Geometry().Size))
		if _, err := m.WriteAt(p, 0); err != nil {
			t.Fatal(err)
		}
	}
}

func memRead(t *testing.T, m *MemDevice, off, n int64) []byte {
	t.Helper()
	m.Reopen()
	p := make([]byte, n)
	if _, err := m.ReadAt(p, off); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOpenBuild: arrays without superblocks place data from sector 0 of
// each member as md's linear/raid0/raid1 do, with the size md gives them,
// and never write outside the data.
func TestOpenBuild(t *testing.T) {
	const k = 1024
	chunk := uint64(128) // 64 KiB
	cases := []struct {
		name  string
		bp    BuildParams
		sizes []int64
		size  int64                           // expected array bytes
		where func(off int64) (dev, at int64) // a chunk's place
	}{
		{"raid0-equal", BuildParams{Level: layout.RAID0, Layout: layout.RAID0Original, ChunkSectors: chunk, RaidDisks: 2, Roles: []int{0, 1}},
			[]int64{1000 * k, 1000 * k}, 2 * 960 * k,
			func(off int64) (int64, int64) { c := off / (64 * k); return c % 2, c / 2 * 64 * k }},
		{"raid0-unequal", BuildParams{Level: layout.RAID0, Layout: layout.RAID0Original, ChunkSectors: chunk, RaidDisks: 2, Roles: []int{0, 1}},
			[]int64{1000 * k, 2000 * k}, 2*960*k + (1984-960)*k,
			func(off int64) (int64, int64) {
				if off >= 2*960*k {
					return 1, 960*k + off - 2*960*k
				}
				c := off / (64 * k)
				return c % 2, c / 2 * 64 * k
			}},
		{"linear", BuildParams{Level: layout.Linear, ChunkSectors: chunk, RaidDisks: 2, Roles: []int{0, 1}},
			[]int64{1000 * k, 700 * k}, (960 + 640) * k,
			func(off int64) (int64, int64) {
				if off >= 960*k {
					return 1, off - 960*k
				}
				return 0, off
			}},
		{"raid1", BuildParams{Level: layout.RAID1, RaidDisks: 2, Roles: []int{0, 1}},
			[]int64{1000 * k, 1100 * k}, 1000 * k,
			func(off int64) (int64, int64) { return 0, off }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mems := make([]*MemDevice, len(tc.sizes))
			for i, s := range tc.sizes {
				mems[i] = NewMemDevice(s)
			}
			fillAll(t, mems, 0xee)
			a, err := OpenBuild(devices(mems), tc.bp, testOptions())
			if err != nil {
				t.Fatal(err)
			}
			if a.Persistent() {
				t.Error("Persistent() after OpenBuild")
			}
			if a.Size() != tc.size {
				t.Fatalf("size %d, want %d", a.Size(), tc.size)
			}
			data := make([]byte, a.Size())
			fillPattern(newRand(7), data)
			if _, err := a.WriteAt(data, 0); err != nil {
				t.Fatal(err)
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			for off := int64(0); off < a.Size(); off += 64 * k {
				dev, at := tc.where(off)
				n := min(64*k, a.Size()-off)
				if got := memRead(t, mems[dev], at, n); !bytes.Equal(got, data[off:off+n]) {
					t.Fatalf("chunk at %d not at device %d offset %d", off, dev, at)
				}
			}
			// Beyond the data: untouched (no superblock, no bitmap).
			for i, m := range mems {
				used := int64(a.geo.DevSectors(i)) * 512
				if tail := memRead(t, m, used, m.Geometry().Size-used); !bytes.Equal(tail, bytes.Repeat([]byte{0xee}, len(tail))) {
					t.Errorf("device %d written beyond its %d data bytes", i, used)
				}
			}
			// Built again: the same data.
			b, err := OpenBuild(devices(mems), tc.bp, testOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			got := make([]byte, b.Size())
			if _, err := b.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("built again: data differs (%v)", err)
			}
		})
	}
}

// TestOpenBuildRAID1Resync: a raid1 built without AssumeClean is resynced
// (md_set_array_info: recovery_cp 0), with it it is clean at once.
func TestOpenBuildRAID1Resync(t *testing.T) {
	for _, clean := range []bool{false, true} {
		mems := []*MemDevice{NewMemDevice(1 << 20), NewMemDevice(1 << 20)}
		fillAll(t, mems[:1], 0x11)
		fillAll(t, mems[1:], 0x22)
		o := DefaultOptions()
		a, err := OpenBuild(devices(mems), BuildParams{Level: layout.RAID1, RaidDisks: 2, Roles: []int{0, 1}, AssumeClean: clean}, o)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := a.WaitSync(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		same := bytes.Equal(memRead(t, mems[0], 0, 1<<20), memRead(t, mems[1], 0, 1<<20))
		if same == clean {
			t.Errorf("assume-clean %v: members equal %v", clean, same)
		}
	}
}

func TestOpenBuildRefuses(t *testing.T) {
	mems := []*MemDevice{NewMemDevice(1 << 20), NewMemDevice(1 << 20)}
	if _, err := OpenBuild(devices(mems), BuildParams{Level: layout.RAID5, RaidDisks: 2, Roles: []int{0, 1}}, testOptions()); err == nil {
		t.Error("raid5 built")
	}
	if _, err := OpenBuild(devices(mems), BuildParams{Level: layout.RAID0, ChunkSectors: 128, RaidDisks: 2, Roles: []int{0, 0}}, testOptions()); err == nil {
		t.Error("two devices in one role")
	}
}
