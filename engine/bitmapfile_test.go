package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"mdtool/bitmap"
	"mdtool/internal/mdadm/plan"
	"mdtool/superblock"
)

// createFileBitmap is create with --bitmap=FILE: the members carry no
// bitmap; the file (mdadm's CreateBitmap content) is returned open.
func createFileBitmap(t testing.TB, s spec) ([]*MemDevice, *os.File) {
	t.Helper()
	var devs []plan.Device
	mems := make([]*MemDevice, s.n)
	for i := range mems {
		mems[i] = NewMemDevice(s.devSize(i))
		devs = append(devs, plan.Device{Path: fmt.Sprintf("/dev/test%d", i), Sectors: uint64(s.devSize(i)) >> 9})
	}
	path := filepath.Join(t.TempDir(), "bm")
	r, err := plan.Plan(plan.Options{
		MDDevice: "/dev/md0", Metadata: s.metadata, Level: s.level, Layout: s.layout,
		RaidDevices: s.n, ChunkKiB: s.chunkKiB, Bitmap: path, Homehost: "any", AssumeClean: true, Force: true,
		Now: time.Unix(1700000000, 0), Rand: rand.NewChaCha8([32]byte{1, 2, 3}), Devices: devs,
	})
	if err != nil {
		t.Fatalf("plan %v: %v", s, err)
	}
	for _, m := range r.Members {
		for _, w := range m.Writes {
			if _, err := mems[m.Device].WriteAt(w.Data, w.Offset); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(path, plan.NewBitmapFile(*r.BitmapFileHeader), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return mems, f
}

func fileBits(t testing.TB, f *os.File) (*bitmap.Header, uint64, int64) {
	t.Helper()
	h, bits, err := readBitmapFile(f)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := bitmap.Bits(bits).CountDirty(h.Chunks())
	return h, d, st.Size()
}

// TestBitmapFileMaintained: with --bitmap=FILE the runtime keeps the bits
// and events in the file exactly as in an internal bitmap (set before a
// write, cleared by the daemon passes), the file keeps its size, and the
// superblocks record no bitmap.
func TestBitmapFileMaintained(t *testing.T) {
	for _, s := range []spec{
		{level: "raid1", n: 2},
		{level: "raid5", n: 3, chunkKiB: 64},
		{level: "raid10", n: 4, chunkKiB: 64, layout: "n2"},
		{level: "raid1", n: 2, metadata: "0.90"},
	} {
		t.Run(s.String(), func(t *testing.T) {
			s.devMiB = []int{16}
			mems, f := createFileBitmap(t, s)
			_, dirty0, size0 := fileBits(t, f)
			if dirty0 == 0 {
				t.Fatal("a new bitmap file has no bit set")
			}
			clk := &fakeClock{t: time.Unix(1700000100, 0)}
			o := testOptions()
			o.Clock = clk.Now
			o.BitmapFile = f
			a := open(t, mems, o)
			if a.BitmapFile() != f.Name() || !a.HasBitmap() {
				t.Fatalf("BitmapFile() = %q, HasBitmap %v", a.BitmapFile(), a.HasBitmap())
			}
			for i := 0; i < 3; i++ {
				clk.Add(6 * time.Second)
				if err := a.Tick(); err != nil {
					t.Fatal(err)
				}
			}
			if _, d, _ := fileBits(t, f); d != 0 {
				t.Fatalf("%d dirty bits after idle daemon passes", d)
			}
			p := make([]byte, 4096)
			mustWrite(t, a, nil, p, a.Size()/2/4096*4096)
			h, d, size := fileBits(t, f)
			if d == 0 {
				t.Error("no dirty bit in the file after a write")
			}
			if size != size0 {
				t.Errorf("file size %d, was %d", size, size0)
			}
			for i, m := range mems {
				sb := readSB(t, m)
				if sb.FeatureMap&superblock.FeatureBitmapOffset != 0 || sb.BitmapOffset != 0 {
					t.Errorf("member %d: superblock records a bitmap (features %#x offset %d)", i, sb.FeatureMap, sb.BitmapOffset)
				}
				if h.Events != sb.Events {
					t.Errorf("member %d: file events %d, superblock %d", i, h.Events, sb.Events)
				}
			}
			for i := 0; i < 3; i++ {
				clk.Add(6 * time.Second)
				a.Tick()
			}
			if _, d, _ := fileBits(t, f); d != 0 {
				t.Errorf("%d dirty bits after the daemon passes", d)
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestBitmapFileDegradedReAdd: writes while a member is out stay dirty
// in the file (md clears nothing while degraded); the member added back
// is recovered guided by them alone, and the daemon then clears them.
func TestBitmapFileDegradedReAdd(t *testing.T) {
	s := spec{level: "raid5", n: 3, chunkKiB: 64, devMiB: []int{16}}
	mems, f := createFileBitmap(t, s)
	clk := &fakeClock{t: time.Unix(1700000100, 0)}
	o := recoverOptions()
	o.Clock = clk.Now
	o.BitmapFile = f
	a := open(t, mems, o)
	defer a.Close()
	tick := func() {
		for i := 0; i < 4; i++ {
			clk.Add(10 * time.Second)
			a.Tick()
		}
	}
	m := newModel(a.Size())
	tick()
	if err := a.FailDevice(1); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, a.Size() / 2} {
		q := make([]byte, 4096)
		fillPattern(newRand(uint64(off)), q)
		mustWrite(t, a, m, q, off)
	}
	tick()
	h, d, _ := fileBits(t, f)
	if d == 0 || d > 4 {
		t.Fatalf("%d dirty bits in the file after two degraded writes", d)
	}
	if err := a.RemoveDevice(1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddDevice(mems[1].Reopen(), AddOptions{ReAdd: true, Replacement: -1}); err != nil {
		t.Fatal(err)
	}
	waitSync(t, a)
	st := a.SyncStatus()
	if st.LastAction != ActionRecover || a.Degraded() != 0 {
		t.Fatalf("after re-add: %+v, degraded %d", st, a.Degraded())
	}
	// guided: far less than the member (recovery goes by stripes of
	// the raid chunk, wider than these 4 KiB bitmap chunks)
	if max := a.geo.DevSectors(0) / 16; st.Written == 0 || st.Written > max {
		t.Errorf("re-add wrote %d sectors, want 1..%d (%d dirty chunks of %d bytes)", st.Written, max, d, h.ChunkSize)
	}
	if mm, err := a.Check(context.Background(), false); err != nil || mm != 0 {
		t.Fatalf("check: %d, %v", mm, err)
	}
	checkContent(t, a, m)
	tick()
	if _, d, _ := fileBits(t, f); d != 0 {
		t.Errorf("%d dirty bits after the re-add and the daemon passes", d)
	}
}

// TestBitmapFileRefused: a file of another array, a short file and a
// file given for an array with an internal bitmap are refused at Open.
func TestBitmapFileRefused(t *testing.T) {
	s := spec{level: "raid1", n: 2, devMiB: []int{16}}
	mems, _ := createFileBitmap(t, s)
	_, other := createFileBitmap(t, s)
	if _, err := other.WriteAt([]byte{0xee}, 8); err != nil { // uuid[0]
		t.Fatal(err)
	}
	o := testOptions()
	o.BitmapFile = other
	if _, err := Open(devices(mems), o); err == nil {
		t.Error("a bitmap file of another array was accepted")
	}
	short, err := os.Create(filepath.Join(t.TempDir(), "short"))
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	short.Write(make([]byte, 100))
	o.BitmapFile = short
	if _, err := Open(devices(mems), o); err == nil || !errors.Is(err, ErrBitmapFileShort) {
		t.Errorf("short file: %v, want ErrBitmapFileShort", err)
	}
}

// TestBitmapFileOverInternal: given a file, an array with an internal
// bitmap runs on the file, and its superblocks drop the internal bitmap
// when next written, as md's super_1_validate and super_1_sync do when
// bitmap_info.file is set.
func TestBitmapFileOverInternal(t *testing.T) {
	internal := create(t, spec{level: "raid1", n: 2, devMiB: []int{16}, bitmap: true})
	_, f := createFileBitmap(t, spec{level: "raid1", n: 2, devMiB: []int{16}})
	o := testOptions()
	o.BitmapFile = f
	a := open(t, internal, o)
	defer a.Close()
	if a.BitmapFile() != f.Name() {
		t.Fatalf("BitmapFile() = %q", a.BitmapFile())
	}
	mustWrite(t, a, nil, make([]byte, 4096), 0)
	if _, d, _ := fileBits(t, f); d == 0 {
		t.Error("the write set no bit in the file")
	}
	if sb := readSB(t, internal[0]); sb.FeatureMap&superblock.FeatureBitmapOffset != 0 {
		t.Errorf("superblock still records the internal bitmap: features %#x", sb.FeatureMap)
	}
}

// TestBitmapFileAddRemove: AddBitmapFile on a running array loads the
// file out of date (every bit set, then cleared by the daemon), writes
// then set bits in it; RemoveBitmap lets it go: later writes leave the
// file alone and the superblocks never record a bitmap.
func TestBitmapFileAddRemove(t *testing.T) {
	s := spec{level: "raid1", n: 2, devMiB: []int{16}}
	_, f := createFileBitmap(t, s)
	mems := create(t, s) // same UUID (same seed), no bitmap
	clk := &fakeClock{t: time.Unix(1700000100, 0)}
	o := testOptions()
	o.Clock = clk.Now
	a := open(t, mems, o)
	defer a.Close()
	tick := func() {
		for i := 0; i < 3; i++ {
			clk.Add(6 * time.Second)
			a.Tick()
		}
	}
	p := make([]byte, 4096)
	mustWrite(t, a, nil, p, 0)
	if err := a.AddBitmapFile(f); err != nil {
		t.Fatal(err)
	}
	if err := a.AddBitmapFile(f); !errors.Is(err, ErrBitmapPresent) {
		t.Errorf("second AddBitmapFile: %v", err)
	}
	h, _, _ := fileBits(t, f)
	if sb := readSB(t, mems[0]); h.Events != sb.Events || sb.FeatureMap&superblock.FeatureBitmapOffset != 0 {
		t.Errorf("after the add: file events %d, superblock events %d, features %#x", h.Events, sb.Events, sb.FeatureMap)
	}
	tick()
	if _, d, _ := fileBits(t, f); d != 0 {
		t.Fatalf("%d dirty after the daemon passes", d)
	}
	mustWrite(t, a, nil, p, 8<<20)
	if _, d, _ := fileBits(t, f); d == 0 {
		t.Fatal("no dirty bit after a write")
	}
	tick()
	if err := a.RemoveBitmap(); err != nil {
		t.Fatal(err)
	}
	if a.HasBitmap() || a.BitmapFile() != "" {
		t.Fatal("bitmap still there after RemoveBitmap")
	}
	before, _, _ := fileBits(t, f)
	mustWrite(t, a, nil, p, 4<<20)
	after, d, _ := fileBits(t, f)
	if d != 0 || after.Events != before.Events {
		t.Errorf("the file changed after its removal: %d dirty, events %d -> %d", d, before.Events, after.Events)
	}
}
