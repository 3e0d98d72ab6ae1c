package wib

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"mdtool/bitmap"
)

// The standard test bitmap: 65280 chunks of 4 KiB (a 255 MiB raid1
// component, as `mdadm --grow --bitmap=internal --bitmap-chunk=4K` makes
// it): 8416 bytes of storage, three pages, the last one holding 224 bytes.
var stdHeader = testHeader(65280*8, 4096)

const (
	chunkPage0 = 0                      // byte 256: page 0, block 0
	chunkPage1 = (4096 + 600 - 256) * 8 // byte 4696: page 1, block 1
	chunkLast  = 65279                  // byte 8415: page 2 (the last), block 0
)

// 1.0 placement: superblock 8 KiB before the end of a 64 MiB member.
const sb10 = 64<<20 - 8192

func TestStdHeader(t *testing.T) {
	if got := stdHeader.Bytes(); got != 8416 {
		t.Fatalf("storage bytes = %d, want 8416", got)
	}
	for c, want := range map[uint64]uint64{chunkPage0: 256, chunkPage1: 4696, chunkLast: 8415} {
		if got := bitmap.ByteOf(c); got != want {
			t.Errorf("ByteOf(%d) = %d, want %d", c, got, want)
		}
	}
}

type ext struct{ off, n int64 }

func TestExtentsPerGeometry(t *testing.T) {
	g12 := MemberGeom{LogicalBlock: 512, PhysicalBlock: 512, BitmapStart: 8192, Limit: 1 << 20}
	with := func(g MemberGeom, f func(*MemberGeom)) MemberGeom { f(&g); return g }
	tests := []struct {
		name string
		g    MemberGeom
		sub  bool
		want map[uint64]ext // chunk -> the single write it causes
	}{
		{"1.2 lbs512 no io_opt", g12, true,
			map[uint64]ext{chunkPage0: {0, 512}, chunkPage1: {4608, 512}, chunkLast: {8192, 512}}},
		{"1.2 lbs512 pbs4096", with(g12, func(g *MemberGeom) { g.PhysicalBlock = 4096 }), true,
			map[uint64]ext{chunkPage0: {0, 4096}, chunkPage1: {4096, 4096}, chunkLast: {8192, 4096}}},
		{"1.2 io_opt4096", with(g12, func(g *MemberGeom) { g.IOOpt = 4096 }), true,
			map[uint64]ext{chunkPage0: {0, 4096}, chunkPage1: {4096, 4096}, chunkLast: {8192, 4096}}},
		{"1.2 io_opt2048", with(g12, func(g *MemberGeom) { g.IOOpt = 2048 }), true,
			map[uint64]ext{chunkPage0: {0, 2048}, chunkPage1: {4096, 2048}, chunkLast: {8192, 2048}}},
		{"1.2 io_opt64K larger than a page", with(g12, func(g *MemberGeom) { g.IOOpt = 65536 }), true,
			map[uint64]ext{chunkPage0: {0, 4096}, chunkPage1: {4096, 4096}, chunkLast: {8192, 4096}}},
		{"1.2 io_opt bigger than the room left", with(g12, func(g *MemberGeom) { g.IOOpt = 4096; g.Limit = 8192 + 8704 }), true,
			map[uint64]ext{chunkPage0: {0, 4096}, chunkPage1: {4096, 4096}, chunkLast: {8192, 512}}},
		{"1.2 lbs4096", with(g12, func(g *MemberGeom) { g.LogicalBlock, g.PhysicalBlock = 4096, 4096 }), true,
			map[uint64]ext{chunkPage0: {0, 4096}, chunkPage1: {4096, 4096}, chunkLast: {8192, 4096}}},
		{"1.2 +1K offset (grow without sysfs) pbs4096",
			with(g12, func(g *MemberGeom) { g.BitmapStart = 4096 + 1024; g.PhysicalBlock = 4096 }), true,
			// device-aligned 4 KiB where possible, never before the bitmap
			map[uint64]ext{chunkPage0: {0, 3072}, chunkPage1: {3072, 4096}, chunkLast: {7168, 4096}}},
		{"1.0 before sb, limit at the bad-block log, pbs4096",
			MemberGeom{LogicalBlock: 512, PhysicalBlock: 4096, BitmapStart: sb10 - 4096 - 12288, Limit: sb10 - 4096}, true,
			map[uint64]ext{chunkPage0: {0, 4096}, chunkPage1: {4096, 4096}, chunkLast: {8192, 4096}}},
		{"1.0 before sb, tight room, unaligned, pbs4096",
			MemberGeom{LogicalBlock: 512, PhysicalBlock: 4096, BitmapStart: sb10 - 8704, Limit: sb10}, true,
			map[uint64]ext{chunkPage0: {0, 512}, chunkPage1: {4608, 4096}, chunkLast: {4608, 4096}}},
		{"1.0 before sb, lbs512 only",
			MemberGeom{LogicalBlock: 512, BitmapStart: sb10 - 12288, Limit: sb10}, true,
			map[uint64]ext{chunkPage0: {0, 512}, chunkPage1: {4608, 512}, chunkLast: {8192, 512}}},
		{"no limit (bitmap after the superblock)", MemberGeom{LogicalBlock: 512, IOOpt: 4096, BitmapStart: 64<<20 - 4096}, true,
			map[uint64]ext{chunkPage0: {0, 4096}, chunkLast: {8192, 4096}}},
		// Whole pages: the kernel's rule.
		{"whole page lbs512 (Linux 6.1)", g12, false,
			map[uint64]ext{chunkPage0: {0, 4096}, chunkPage1: {4096, 4096}, chunkLast: {8192, 512}}},
		{"whole page io_opt4096 (Linux >= 6.4)", with(g12, func(g *MemberGeom) { g.IOOpt = 4096 }), false,
			map[uint64]ext{chunkPage0: {0, 4096}, chunkLast: {8192, 4096}}},
		{"whole page io_opt64K capped at the last page (Linux >= 6.11)", with(g12, func(g *MemberGeom) { g.IOOpt = 65536 }), false,
			map[uint64]ext{chunkLast: {8192, 4096}}},
		{"whole page io_opt, no room", with(g12, func(g *MemberGeom) { g.IOOpt = 4096; g.Limit = 8192 + 8704 }), false,
			map[uint64]ext{chunkLast: {8192, 512}}},
		{"whole page pbs4096 fallback", with(g12, func(g *MemberGeom) { g.PhysicalBlock = 4096 }), false,
			map[uint64]ext{chunkLast: {8192, 4096}}},
		{"whole page 1.0 tight", MemberGeom{LogicalBlock: 512, IOOpt: 4096, BitmapStart: sb10 - 8704, Limit: sb10}, false,
			map[uint64]ext{chunkPage1: {4096, 4096}, chunkLast: {8192, 512}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, r, _ := setup{h: stdHeader, geoms: []MemberGeom{tc.g}, sub: tc.sub}.build(t)
			for _, c := range []uint64{chunkPage0, chunkPage1, chunkLast} {
				want, ok := tc.want[c]
				if !ok {
					continue
				}
				r.resetLog()
				if err := b.StartWrite(b.chunkSector(c), 8); err != nil {
					t.Fatalf("chunk %d: StartWrite: %v", c, err)
				}
				ws := r.writes()
				if len(ws) != 1 || ws[0].off != want.off || int64(len(ws[0].data)) != want.n {
					t.Errorf("chunk %d: writes %s, want [%d,+%d)", c, fmtWrites(ws), want.off, want.n)
				}
				if !r.diskBit(0, tc.g, c) {
					t.Errorf("chunk %d: bit not on disk after StartWrite", c)
				}
				checkDiskMatchesImage(t, b, r, 0)
			}
		})
	}
}

func fmtWrites(ws []rec) string {
	var s bytes.Buffer
	for _, w := range ws {
		fmt.Fprintf(&s, "m%d[%d,+%d) ", w.member, w.off, len(w.data))
	}
	return s.String()
}

// checkDiskMatchesImage compares the member's on-disk storage with the
// runtime's image.
func checkDiskMatchesImage(t *testing.T, b *Bitmap, r *recTarget, member int) {
	t.Helper()
	disk := r.area(member, b.bytes)
	b.mu.Lock()
	img := append([]byte(nil), b.img[:b.bytes]...)
	b.mu.Unlock()
	if !bytes.Equal(disk, img) {
		for i := range disk {
			if disk[i] != img[i] {
				t.Fatalf("member %d: disk differs from the image at storage byte %d: %#x vs %#x", member, i, disk[i], img[i])
			}
		}
	}
}

func TestMembersWithDifferentGeometry(t *testing.T) {
	geoms := []MemberGeom{
		{Index: 0, LogicalBlock: 512, BitmapStart: 8192, Limit: 1 << 20},
		{Index: 1, LogicalBlock: 512, PhysicalBlock: 4096, BitmapStart: 8192, Limit: 1 << 20},
		{Index: 2, LogicalBlock: 4096, BitmapStart: 8192, Limit: 1 << 20},
		{Index: 5, LogicalBlock: 512, IOOpt: 4096, BitmapStart: sb10 - 8704, Limit: sb10},
	}
	b, r, _ := setup{h: stdHeader, geoms: geoms, sub: true}.build(t)
	if err := b.StartWrite(b.chunkSector(chunkLast), 8); err != nil {
		t.Fatal(err)
	}
	want := map[int]ext{0: {8192, 512}, 1: {8192, 4096}, 2: {8192, 4096}, 5: {4608, 4096}}
	got := map[int]ext{}
	for _, w := range r.writes() {
		if _, dup := got[w.member]; dup {
			t.Errorf("member %d written twice", w.member)
		}
		got[w.member] = ext{w.off, int64(len(w.data))}
	}
	for m, w := range want {
		if got[m] != w {
			t.Errorf("member %d: write %v, want %v", m, got[m], w)
		}
		checkDiskMatchesImage(t, b, r, m)
	}
	if st := b.Stats(); st.Flushes != 1 || st.Writes != 4 || st.Bytes != 512+3*4096 {
		t.Errorf("stats %+v, want 1 flush, 4 writes, %d bytes", st, 512+3*4096)
	}
}

func TestWiden(t *testing.T) {
	tests := []struct {
		s, e, start, unit, bound uint64
		ws, we                   uint64
	}{
		{0, 512, 8192, 4096, 12288, 0, 4096},
		{8192, 8704, 8192, 4096, 8704, 8192, 8704},     // end would pass the bound
		{0, 512, 5120, 4096, 12288, 0, 3072},           // start would precede the bitmap
		{512, 1024, 5120, 4096, 12288, 512, 3072},      // start side kept, end widened
		{4096, 4608, 5120, 4096, 12288, 3072, 7168},    // crosses a page boundary, aligned on the device
		{1024, 1536, 0, 2048, 12288, 0, 2048},          // io_opt 2 KiB
		{3584, 4096, 0, 4096, 4096, 0, 4096},           // ends exactly at the bound
		{11776, 12288, 512, 4096, 12288, 11776, 12288}, // end would pass the bitmap's pages
	}
	for _, tc := range tests {
		s, e := widen(tc.s, tc.e, tc.start, tc.unit, tc.bound)
		if s != tc.ws || e != tc.we {
			t.Errorf("widen(%d,%d, start %d, unit %d, bound %d) = [%d,%d), want [%d,%d)",
				tc.s, tc.e, tc.start, tc.unit, tc.bound, s, e, tc.ws, tc.we)
		}
	}
}

func TestWidenUnit(t *testing.T) {
	tests := []struct {
		g    MemberGeom
		want uint64
	}{
		{MemberGeom{LogicalBlock: 512}, 0},
		{MemberGeom{LogicalBlock: 512, PhysicalBlock: 512}, 0},
		{MemberGeom{LogicalBlock: 512, PhysicalBlock: 4096}, 4096},
		{MemberGeom{LogicalBlock: 512, IOOpt: 4096}, 4096},
		{MemberGeom{LogicalBlock: 512, IOOpt: 1024, PhysicalBlock: 4096}, 1024},
		{MemberGeom{LogicalBlock: 512, IOOpt: 3 * 65536, PhysicalBlock: 4096}, 4096}, // raid5 stripe
		{MemberGeom{LogicalBlock: 512, IOOpt: 1536, PhysicalBlock: 4096}, 4096},      // not a power of two
		{MemberGeom{LogicalBlock: 4096, IOOpt: 4096}, 0},
		{MemberGeom{LogicalBlock: 4096, IOOpt: 1 << 20}, 4096},
	}
	for _, tc := range tests {
		if got := widenUnit(tc.g); got != tc.want {
			t.Errorf("widenUnit(%+v) = %d, want %d", tc.g, got, tc.want)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	g := MemberGeom{LogicalBlock: 512, BitmapStart: 8192, Limit: 1 << 20}
	bits := make([]byte, 8160)
	bad := stdHeader
	bad.ChunkSize = 3000
	clustered := stdHeader
	clustered.Version = bitmap.VersionClustered
	empty := stdHeader
	empty.SyncSize = 0
	tests := []struct {
		name string
		h    bitmap.Header
		bits []byte
		g    MemberGeom
		want error
	}{
		{"bad chunksize", bad, bits, g, bitmap.ErrChunkSize},
		{"clustered", clustered, bits, g, ErrClustered},
		{"no chunks", empty, bits, g, ErrNoChunks},
		{"short bits", stdHeader, bits[:8159], g, ErrShortBits},
		{"start not aligned to a 4K logical block", stdHeader, bits,
			MemberGeom{LogicalBlock: 4096, BitmapStart: 4096 + 1024, Limit: 1 << 20}, ErrGeometry},
		{"logical block 8K", stdHeader, bits, MemberGeom{LogicalBlock: 8192, BitmapStart: 8192, Limit: 1 << 20}, ErrGeometry},
		{"limit before start", stdHeader, bits, MemberGeom{LogicalBlock: 512, BitmapStart: 8192, Limit: 4096}, ErrGeometry},
		{"bitmap runs into data", stdHeader, bits, MemberGeom{LogicalBlock: 512, BitmapStart: 8192, Limit: 8192 + 8192}, bitmap.ErrNoFit},
		{"bitmap runs into the superblock", stdHeader, bits, MemberGeom{LogicalBlock: 512, BitmapStart: sb10 - 8192, Limit: sb10}, bitmap.ErrNoFit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecTarget(t, tc.g)
			_, err := New(Config{Header: tc.h, Bits: tc.bits, SubPage: true}, r)
			if !errors.Is(err, tc.want) {
				t.Fatalf("New: %v, want %v", err, tc.want)
			}
		})
	}
}
