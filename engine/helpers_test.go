package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"mdtool/internal/mdadm/plan"
)

// spec describes a test array, in mdadm --create terms.
type spec struct {
	level    string
	layout   string
	n        int
	chunkKiB uint64
	devMiB   []int // per device size in MiB (len 1: all equal)
	bitmap   bool
	metadata string
	journal  bool // one more device: the write journal (--write-journal)
}

func (s spec) String() string {
	l := s.level
	if s.layout != "" {
		l += "-" + s.layout
	}
	l += fmt.Sprintf("-%dd", s.n)
	if s.chunkKiB != 0 {
		l += fmt.Sprintf("-c%d", s.chunkKiB)
	}
	if s.bitmap {
		l += "-bm"
	}
	if s.metadata != "" {
		l += "-v" + s.metadata
	}
	if s.journal {
		l += "-journal"
	}
	return l
}

func (s spec) devSize(i int) int64 {
	mib := 8
	switch {
	case len(s.devMiB) == 1:
		mib = s.devMiB[0]
	case i < len(s.devMiB):
		mib = s.devMiB[i]
	}
	return int64(mib) << 20
}

// create makes the members of a fresh array (as mdadm --create
// --assume-clean would) on memory devices.
func create(t testing.TB, s spec) []*MemDevice {
	t.Helper()
	return createChunk(t, s, 0)
}

// createChunk is create with an explicit bitmap chunk (bytes; 0: mdadm's
// default).
func createChunk(t testing.TB, s spec, bmChunk uint64) []*MemDevice {
	t.Helper()
	var devs []plan.Device
	n := s.n + b2i(s.journal)
	mems := make([]*MemDevice, n)
	for i := range mems {
		mems[i] = NewMemDevice(s.devSize(i))
		devs = append(devs, plan.Device{Path: fmt.Sprintf("/dev/test%d", i), Sectors: uint64(s.devSize(i)) >> 9, Journal: i == s.n})
	}
	bm := "none"
	if s.level == "raid0" || s.level == "linear" || s.level == "multipath" {
		bm = "" // mdadm: "bitmaps not meaningful with level ..."
	}
	if s.bitmap {
		bm = "internal"
	}
	r, err := plan.Plan(plan.Options{
		MDDevice: "/dev/md0", Metadata: s.metadata, Level: s.level, Layout: s.layout,
		RaidDevices: s.n, ChunkKiB: s.chunkKiB, Bitmap: bm, BitmapChunk: bmChunk, Homehost: "any", AssumeClean: true, Force: true,
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
	return mems
}

func devices(mems []*MemDevice, skip ...int) []Device {
	var out []Device
outer:
	for i, m := range mems {
		for _, s := range skip {
			if s == i {
				continue outer
			}
		}
		out = append(out, m.Reopen())
	}
	return out
}

func testOptions() Options {
	o := DefaultOptions()
	o.NoDaemon = true
	return o
}

func open(t testing.TB, mems []*MemDevice, o Options, skip ...int) *Array {
	t.Helper()
	a, err := Open(devices(mems, skip...), o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return a
}

// model is the expected array content.
type model struct {
	b []byte
}

func newModel(size int64) *model { return &model{b: make([]byte, size)} }

func (m *model) write(p []byte, off int64) { copy(m.b[off:], p) }

// fill writes a deterministic pattern of n bytes at off through a and the
// model.
func fillPattern(r *rand.Rand, p []byte) {
	for i := 0; i+8 <= len(p); i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			p[i+j] = byte(v >> (8 * j))
		}
	}
}

func mustWrite(t testing.TB, a *Array, m *model, p []byte, off int64) {
	t.Helper()
	n, err := a.WriteAt(p, off)
	if err != nil || n != len(p) {
		t.Fatalf("write %d at %d: n=%d err=%v", len(p), off, n, err)
	}
	if m != nil {
		m.write(p, off)
	}
}

func checkContent(t testing.TB, a *Array, m *model) {
	t.Helper()
	got := make([]byte, a.Size())
	// read in odd-sized pieces to exercise splitting
	step := int64(3*a.block + 1<<20)
	for off := int64(0); off < a.Size(); off += step {
		n := min(step, a.Size()-off)
		if _, err := a.ReadAt(got[off:off+n], off); err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
	}
	if !bytes.Equal(got, m.b) {
		for i := range got {
			if got[i] != m.b[i] {
				t.Fatalf("content differs from byte %d (sector %d)", i, i/512)
			}
		}
	}
}

// workload writes a mix of aligned and unaligned requests.
func workload(t testing.TB, a *Array, m *model, seed uint64, count int) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	size := a.Size()
	bs := a.block
	unit := a.IOOpt()
	if unit == 0 {
		unit = 64 << 10
	}
	for i := 0; i < count; i++ {
		var off, n int64
		switch i % 4 {
		case 0: // aligned full stripes
			k := int64(1 + r.IntN(3))
			n = min(k*unit, size)
			off = r.Int64N((size-n)/unit+1) * unit
		case 1: // small unaligned
			n = bs * int64(1+r.IntN(16))
			off = r.Int64N((size-n)/bs+1) * bs
		case 2: // large unaligned (head + stripes + tail)
			n = min(bs*int64(1+r.IntN(int(3*unit/bs))), size)
			off = r.Int64N((size-n)/bs+1) * bs
		default: // one block anywhere
			n = bs
			off = r.Int64N(size/bs) * bs
		}
		p := make([]byte, n)
		fillPattern(r, p)
		mustWrite(t, a, m, p, off)
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed*31+1)) }
