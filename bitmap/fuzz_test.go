package bitmap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// seedWindows returns the first 4 KiB of every internal bitmap in the
// fixtures under ../testdata (none when they are absent; the synthetic
// seeds always exist).
func seedWindows(t testing.TB) [][]byte {
	var out [][]byte
	for _, fb := range fixtureBitmaps(t) {
		out = append(out, fb.storage[:min(len(fb.storage), PageSize)])
	}
	return out
}

func syntheticSeeds() [][]byte {
	h := goodHeader()
	seeds := [][]byte{
		NewArea(h, 0xff, 4096),
		NewArea(h, 0, 512),
		h.Marshal(),
		h.Marshal()[:100],
		nil,
	}
	for _, f := range []func(*Header){
		func(h *Header) { h.Version = 6 },
		func(h *Header) { h.Version = 3 },
		func(h *Header) { h.Version = 5; h.Nodes = 2 },
		func(h *Header) { h.ChunkSize = 4097 },
		func(h *Header) { h.DaemonSleep = 1 << 31 },
		func(h *Header) { h.WriteBehind = 1 << 14 },
		func(h *Header) { h.SyncSize = 1 << 62; h.ChunkSize = 512 },
	} {
		x := *h
		f(&x)
		seeds = append(seeds, NewArea(&x, 0xa5, 512))
	}
	return seeds
}

// FuzzParse: Parse never panics; a returned header re-marshals to the input
// bytes; a header that Parse accepted is accepted again after Marshal; the
// -X counting never panics and agrees with the naive count.
func FuzzParse(f *testing.F) {
	for _, s := range seedWindows(f) {
		f.Add(s)
	}
	for _, s := range syntheticSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Parse(b)
		if h == nil {
			if err == nil {
				t.Fatal("nil header without an error")
			}
			if !errors.Is(err, ErrShort) && !errors.Is(err, ErrBadMagic) {
				t.Fatalf("nil header with %v", err)
			}
			return
		}
		if got := h.Marshal(); !bytes.Equal(got, b[:HeaderSize]) {
			t.Fatalf("Marshal(Parse(b)) != b[:256]")
		}
		h2, err2 := Parse(h.Marshal())
		if *h2 != *h || (err == nil) != (err2 == nil) {
			t.Fatalf("re-parse differs: %v vs %v", err, err2)
		}
		if err != nil && !errors.Is(err, ErrLockless) && len(offsets(err)) == 0 {
			t.Fatalf("error without a FormatError: %v", err)
		}
		total, dirty := ExamineCounts(h, b)
		if dirty > total {
			t.Fatalf("dirty %d > total %d", dirty, total)
		}
		if total > 0 && dirty != naiveDirty(b[HeaderSize:], total) {
			t.Fatalf("dirty %d, naive %d", dirty, naiveDirty(b[HeaderSize:], total))
		}
	})
}

// FuzzCountDirty compares the word-at-a-time count with the bit loop.
func FuzzCountDirty(f *testing.F) {
	f.Add([]byte{0xff, 0x01, 0x80}, uint64(17))
	f.Add(bytes.Repeat([]byte{0x5a}, 100), uint64(799))
	f.Add([]byte{}, uint64(3))
	f.Fuzz(func(t *testing.T, b []byte, total uint64) {
		d, c := Bits(b).CountDirty(total)
		want := min(total, uint64(len(b))*8)
		if c != want || d != naiveDirty(b, want) {
			t.Fatalf("got %d,%d want %d,%d", d, c, naiveDirty(b, want), want)
		}
	})
}

// FuzzDirtyTracker drives a tracker with arbitrary geometry and marks and
// checks the SubPage invariants (aligned, disjoint, in bounds).
func FuzzDirtyTracker(f *testing.F) {
	f.Add(uint64(40256), uint16(512), uint32(4096), int64(8), uint64(2048), []byte{1, 2, 3, 200, 17})
	f.Add(uint64(258), uint16(4096), uint32(0), int64(-16), uint64(0), []byte{0})
	f.Fuzz(func(t *testing.T, size uint64, lbs uint16, io uint32, off int64, data uint64, marks []byte) {
		size %= 1 << 20
		g := WriteGeometry{StorageBytes: size, SuperStart: 1 << 21, Offset: off % (1 << 20),
			DataOffset: data % (1 << 22), DataSectors: 1 << 20, LogicalBlock: uint32(lbs), IOOpt: io}
		d, err := NewDirtyTracker(g)
		if err != nil {
			return
		}
		mark := func() {
			for i := 0; i+1 < len(marks); i += 2 {
				d.MarkRange(uint64(binary.LittleEndian.Uint16(marks[i:]))*uint64(len(marks))%max(size, 1), uint64(marks[i+1]))
			}
		}
		mark()
		ext, err := d.Flush(SubPage, nil)
		if err != nil {
			t.Fatalf("%+v: %v", g, err)
		}
		valid := roundUp(size, uint64(lbs))
		b, hasB := g.Boundary()
		for i, e := range ext {
			if e.Len == 0 || e.Off%uint64(lbs) != 0 || e.End()%uint64(lbs) != 0 || e.End() > valid {
				t.Fatalf("%+v: bad extent %v", g, e)
			}
			if i > 0 && ext[i-1].End() >= e.Off {
				t.Fatalf("%+v: extents %v %v overlap", g, ext[i-1], e)
			}
			if hasB && g.Start()*512+int64(e.End()) > b*512 {
				t.Fatalf("%+v: extent %v past the boundary", g, e)
			}
		}
		mark()
		if _, err := d.Flush(WholePage, nil); err != nil {
			t.Fatalf("%+v: whole-page after sub-page: %v", g, err)
		}
	})
}
