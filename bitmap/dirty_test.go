package bitmap

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// chunkAt returns a chunk whose bit is in storage byte off (off >= 256).
func chunkAt(off uint64) uint64 { return (off - HeaderSize) * 8 }

func TestDirtyTrackerFlush(t *testing.T) {
	const multi = 40256 // 10 pages, last page 3392 bytes (3584 rounded to 512)
	mod := func(g WriteGeometry, f func(*WriteGeometry)) WriteGeometry { f(&g); return g }
	type ext = Extent
	tests := []struct {
		name  string
		g     WriteGeometry
		mark  func(t *DirtyTracker)
		sub   []Extent
		whole []Extent
	}{
		{name: "nothing dirty", g: v12(multi, 512, 0, RuleLatest), mark: func(*DirtyTracker) {}},
		{name: "first chunk, lbs 512",
			g:    v12(multi, 512, 0, RuleLatest),
			mark: func(d *DirtyTracker) { d.MarkChunk(0) },
			sub:  []ext{{0, 512}}, whole: []ext{{0, 4096}}},
		{name: "header and a later block of page 0",
			g:    v12(multi, 512, 0, RuleLatest),
			mark: func(d *DirtyTracker) { d.MarkHeader(); d.MarkChunk(chunkAt(1024)) },
			sub:  []ext{{0, 512}, {1024, 512}}, whole: []ext{{0, 4096}}},
		{name: "adjacent blocks form one run",
			g:    v12(multi, 512, 0, RuleLatest),
			mark: func(d *DirtyTracker) { d.MarkChunk(chunkAt(600)); d.MarkChunk(chunkAt(1500)) },
			sub:  []ext{{512, 1024}}, whole: []ext{{0, 4096}}},
		{name: "partial last page, lbs 512",
			g:    v12(multi, 512, 0, RuleLinux61),
			mark: func(d *DirtyTracker) { d.MarkChunk(chunkAt(multi - 1)) },
			sub:  []ext{{39936, 512}}, whole: []ext{{36864, 3584}}},
		{name: "partial last page, lbs 4096",
			g:    v12(multi, 4096, 0, RuleLinux61),
			mark: func(d *DirtyTracker) { d.MarkChunk(chunkAt(multi - 1)) },
			sub:  []ext{{36864, 4096}}, whole: []ext{{36864, 4096}}},
		{name: "lbs 4096 is whole pages",
			g:    v12(multi, 4096, 0, RuleLatest),
			mark: func(d *DirtyTracker) { d.MarkChunk(0); d.MarkChunk(chunkAt(3 * 4096)) },
			sub:  []ext{{0, 4096}, {12288, 4096}}, whole: []ext{{0, 4096}, {12288, 4096}}},
		{name: "runs merge across the page boundary",
			g:    v12(multi, 512, 0, RuleLatest),
			mark: func(d *DirtyTracker) { d.MarkChunk(chunkAt(4095)); d.MarkChunk(chunkAt(4096)) },
			sub:  []ext{{3584, 1024}}, whole: []ext{{0, 4096}, {4096, 4096}}},
		{name: "io 4096 widens to the page",
			g:    v12(multi, 512, 4096, RuleLatest),
			mark: func(d *DirtyTracker) { d.MarkChunk(chunkAt(1024)); d.MarkChunk(chunkAt(3000)) },
			sub:  []ext{{0, 4096}}, whole: []ext{{0, 4096}}},
		{name: "physical 4096 widens like io_opt (512e drive)",
			g:    mod(v12(multi, 512, 0, RuleLatest), func(g *WriteGeometry) { g.PhysicalBlock = 4096 }),
			mark: func(d *DirtyTracker) { d.MarkChunk(chunkAt(5000)) },
			sub:  []ext{{4096, 4096}}, whole: []ext{{4096, 4096}}},
		{name: "io 1024 widens to 1 KiB alignment",
			g:    v12(multi, 512, 1024, RuleLatest),
			mark: func(d *DirtyTracker) { d.MarkChunk(chunkAt(600)); d.MarkChunk(chunkAt(2100)) },
			sub:  []ext{{0, 1024}, {2048, 1024}}, whole: []ext{{0, 4096}}},
		{name: "io 4096 on the last page clipped to lbs-rounded end",
			g:    v12(multi, 512, 4096, RuleLatest),
			mark: func(d *DirtyTracker) { d.MarkChunk(chunkAt(multi - 1)) },
			sub:  []ext{{36864, 3584}}, whole: []ext{{36864, 4096}}},
		{name: "io 64K never fits a page: lbs granularity",
			g:    v12(multi, 512, 65536, RuleLinux64),
			mark: func(d *DirtyTracker) { d.MarkChunk(chunkAt(600)); d.MarkChunk(chunkAt(multi - 1)) },
			sub:  []ext{{512, 512}, {39936, 512}}, whole: []ext{{0, 4096}, {36864, 65536}}},
		{name: "bitmap not 4K aligned: io 4096 cannot align inside the page",
			g:    mod(v12(multi, 512, 4096, RuleLatest), func(g *WriteGeometry) { g.Offset = 2 }),
			mark: func(d *DirtyTracker) { d.MarkChunk(0) },
			sub:  []ext{{0, 512}}, whole: []ext{{0, 4096}}},
		{name: "io larger than remaining room before data",
			// bitmap at 16, lbs-rounded end at 16+79 = 95 = data offset.
			g:    mod(v12(multi, 512, 4096, RuleLatest), func(g *WriteGeometry) { g.DataOffset = 95 }),
			mark: func(d *DirtyTracker) { d.MarkChunk(chunkAt(36900)); d.MarkChunk(chunkAt(multi - 1)) },
			sub:  []ext{{36864, 3584}}, whole: []ext{{36864, 3584}}},
		{name: "io larger than room, only one early block",
			g:    mod(v12(multi, 512, 4096, RuleLatest), func(g *WriteGeometry) { g.DataOffset = 95 }),
			mark: func(d *DirtyTracker) { d.MarkChunk(chunkAt(36900)) },
			sub:  []ext{{36864, 3584}}, whole: []ext{{36864, 3584}}},
		{name: "1.0 DATA BITMAP METADATA, lbs 512",
			g:    v10(258, 512, 0, RuleLatest),
			mark: func(d *DirtyTracker) { d.MarkHeader() },
			sub:  []ext{{0, 512}}, whole: []ext{{0, 512}}},
		{name: "1.0 DATA BITMAP METADATA, io 4096 before the sb",
			g:    v10(258, 512, 4096, RuleLatest),
			mark: func(d *DirtyTracker) { d.MarkHeader() },
			sub:  []ext{{0, 512}}, whole: []ext{{0, 4096}}},
		{name: "1.0 multi-page before the sb, io 4096",
			// 10 pages + 8 bbl sectors below the sb
			g: mod(v10(multi, 512, 4096, RuleLatest), func(g *WriteGeometry) {
				g.Offset = -88
				g.DataSectors = 2097136 - 88
			}),
			mark: func(d *DirtyTracker) { d.MarkChunk(0); d.MarkChunk(chunkAt(multi - 1)) },
			sub:  []ext{{0, 4096}, {36864, 3584}}, whole: []ext{{0, 4096}, {36864, 4096}}},
		{name: "1.0 multi-page flush against the sb",
			// lbs-rounded end exactly at the sb, so the bitmap start is not
			// 4 KiB aligned: no io expansion; the kernel's io_opt write of
			// the last page does not fit either.
			g: mod(v10(multi, 512, 4096, RuleLatest), func(g *WriteGeometry) {
				g.Offset = -79
				g.DataSectors = 2097136 - 79
			}),
			mark: func(d *DirtyTracker) { d.MarkChunk(chunkAt(multi - 1)) },
			sub:  []ext{{39936, 512}}, whole: []ext{{36864, 3584}}},
		{name: "DATA METADATA BITMAP",
			g:    mod(v10(multi, 512, 0, RuleLatest), func(g *WriteGeometry) { g.Offset = 8 }),
			mark: func(d *DirtyTracker) { d.MarkChunk(chunkAt(multi - 1)) },
			sub:  []ext{{39936, 512}}, whole: []ext{{36864, 3584}}},
		{name: "MarkAll",
			g:    v12(5000, 512, 0, RuleLatest),
			mark: func(d *DirtyTracker) { d.MarkAll() },
			sub:  []ext{{0, 5120}}, whole: []ext{{0, 4096}, {4096, 1024}}},
		{name: "MarkRange clipped to the bitmap",
			g:    v12(5000, 512, 0, RuleLatest),
			mark: func(d *DirtyTracker) { d.MarkRange(4900, 1<<40) },
			sub:  []ext{{4608, 512}}, whole: []ext{{4096, 1024}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, mode := range []FlushMode{SubPage, WholePage} {
				d, err := NewDirtyTracker(tt.g)
				if err != nil {
					t.Fatal(err)
				}
				tt.mark(d)
				want := tt.sub
				if mode == WholePage {
					want = tt.whole
				}
				if d.Dirty() != (len(want) > 0) {
					t.Errorf("%v: Dirty() = %v before flush", mode, d.Dirty())
				}
				got, err := d.Flush(mode, nil)
				if err != nil {
					t.Fatalf("%v: %v", mode, err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%v: got %v, want %v", mode, got, want)
				}
				if d.Dirty() {
					t.Errorf("%v: still dirty after flush", mode)
				}
				if again, _ := d.Flush(mode, nil); len(again) != 0 {
					t.Errorf("%v: second flush gave %v", mode, again)
				}
			}
		})
	}
}

func TestDirtyTrackerMarkOutOfRange(t *testing.T) {
	d, err := NewDirtyTracker(v12(258, 512, 0, RuleLatest))
	if err != nil {
		t.Fatal(err)
	}
	if d.MarkChunk(16) { // byte 258: beyond the 258-byte bitmap
		t.Error("MarkChunk beyond the bitmap reported true")
	}
	if !d.MarkChunk(15) {
		t.Error("MarkChunk(15) reported false")
	}
	if d.MarkRange(10, 0) {
		t.Error("empty MarkRange reported true")
	}
	if n := d.DirtyPages(); n != 1 {
		t.Errorf("DirtyPages = %d, want 1", n)
	}
	d.Reset()
	if d.Dirty() {
		t.Error("dirty after Reset")
	}
}

func TestNewDirtyTrackerRefuses(t *testing.T) {
	const multi = 40256
	mod := func(g WriteGeometry, f func(*WriteGeometry)) WriteGeometry { f(&g); return g }
	fit := []struct {
		name string
		g    WriteGeometry
		msg  string
	}{
		{"1.2 bitmap runs into data", mod(v12(multi, 512, 0, RuleLatest), func(g *WriteGeometry) { g.DataOffset = 94 }),
			"bitmap runs in to data"},
		{"1.0 bitmap runs into metadata", mod(v10(multi, 512, 0, RuleLatest), func(g *WriteGeometry) {
			g.Offset = -78
			g.DataSectors = 2097136 - 78
		}), "bitmap runs in to metadata"},
		{"1.0 data runs into bitmap", mod(v10(258, 512, 0, RuleLatest), func(g *WriteGeometry) { g.DataSectors++ }),
			"data runs in to bitmap"},
	}
	for _, tt := range fit {
		var fe *FitError
		if _, err := NewDirtyTracker(tt.g); !errors.As(err, &fe) || fe.Msg != tt.msg {
			t.Errorf("%s: got %v, want FitError %q", tt.name, err, tt.msg)
		}
	}
	for _, g := range []WriteGeometry{
		v12(multi, 8192, 0, RuleLatest),
		v12(multi, 1000, 0, RuleLatest),
		mod(v12(multi, 512, 0, RuleLatest), func(g *WriteGeometry) { g.Offset = -100 }),
	} {
		if _, err := NewDirtyTracker(g); !errors.Is(err, ErrGeometry) {
			t.Errorf("%+v: got %v, want ErrGeometry", g, err)
		}
	}
}

// Random marks on random geometries: SubPage extents are sorted, disjoint,
// logical-block aligned, cover every marked byte, never pass the
// lbs-rounded bitmap end or the boundary, and never write more than
// WholePage does.
func TestDirtyTrackerProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	lbss := []uint32{512, 1024, 2048, 4096}
	ios := []uint32{0, 512, 1024, 4096, 8192, 65536}
	for iter := 0; iter < 3000; iter++ {
		lbs := lbss[r.IntN(len(lbss))]
		bytes := uint64(HeaderSize + r.IntN(6*PageSize))
		valid := roundUp(bytes, uint64(lbs))
		g := WriteGeometry{StorageBytes: bytes, LogicalBlock: lbs, IOOpt: ios[r.IntN(len(ios))], Rule: RuleLatest}
		switch r.IntN(3) {
		case 0: // 1.2 with a data offset anywhere from tight to roomy
			g.SuperStart, g.Offset = 8, int64(r.IntN(3))*2+8
			g.DataOffset = uint64(g.Start()) + (valid+511)/512 + uint64(r.IntN(20))
		case 1: // 1.0 before the sb
			g.SuperStart = 1 << 20
			g.Offset = -int64((valid+511)/512) - int64(r.IntN(20))
			g.DataSectors = uint64(g.Start())
		default: // 1.0 after the sb
			g.SuperStart, g.Offset, g.DataSectors = 1<<20, 8, 1<<20
		}
		d, err := NewDirtyTracker(g)
		if err != nil {
			t.Fatalf("%+v: %v", g, err)
		}
		marked := make([]bool, bytes)
		for k := r.IntN(20); k > 0; k-- {
			off := uint64(r.Int64N(int64(bytes)))
			n := uint64(r.IntN(700) + 1)
			d.MarkRange(off, n)
			for i := off; i < off+n && i < bytes; i++ {
				marked[i] = true
			}
		}
		whole := 0
		if wd, err := NewDirtyTracker(g); err == nil {
			for i, m := range marked {
				if m {
					wd.MarkRange(uint64(i), 1)
				}
			}
			ws, err := wd.Flush(WholePage, nil)
			if err != nil {
				t.Fatalf("%+v whole: %v", g, err)
			}
			for _, e := range ws {
				whole += int(e.Len)
			}
		}
		ext, err := d.Flush(SubPage, nil)
		if err != nil {
			t.Fatalf("%+v: %v", g, err)
		}
		sub := 0
		b, hasB := g.Boundary()
		for i, e := range ext {
			sub += int(e.Len)
			if e.Len == 0 || e.Off%uint64(lbs) != 0 || e.End()%uint64(lbs) != 0 {
				t.Fatalf("%+v: extent %v not lbs aligned", g, e)
			}
			if i > 0 && ext[i-1].End() >= e.Off {
				t.Fatalf("%+v: extents %v %v overlap or touch", g, ext[i-1], e)
			}
			if e.End() > valid {
				t.Fatalf("%+v: extent %v past the bitmap end %d", g, e, valid)
			}
			if hasB && g.Start()*512+int64(e.End()) > b*512 {
				t.Fatalf("%+v: extent %v past the boundary", g, e)
			}
		}
		for i, m := range marked {
			if !m {
				continue
			}
			j, _ := slices.BinarySearchFunc(ext, uint64(i), func(e Extent, x uint64) int {
				if e.End() <= x {
					return -1
				}
				if e.Off > x {
					return 1
				}
				return 0
			})
			if j >= len(ext) || ext[j].Off > uint64(i) || ext[j].End() <= uint64(i) {
				t.Fatalf("%+v: byte %d marked but not written (%v)", g, i, ext)
			}
		}
		if sub > whole {
			t.Fatalf("%+v: sub-page wrote %d > whole-page %d", g, sub, whole)
		}
	}
}

func TestDirtyTrackerNoAllocs(t *testing.T) {
	g := v12(256+(128<<10), 512, 4096, RuleLatest)
	d, err := NewDirtyTracker(g)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]Extent, 0, 64)
	r := rand.New(rand.NewPCG(5, 6))
	chunks := make([]uint64, 32)
	for i := range chunks {
		chunks[i] = uint64(r.IntN(128 << 13))
	}
	for _, mode := range []FlushMode{SubPage, WholePage} {
		allocs := testing.AllocsPerRun(100, func() {
			for _, c := range chunks {
				d.MarkChunk(c)
			}
			d.MarkHeader()
			var err error
			buf, err = d.Flush(mode, buf[:0])
			if err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocations per mark+flush", mode, allocs)
		}
	}
}

// BenchmarkFlush compares bytes written per flush with and without
// sub-page tracking: 16 random chunk updates per flush on a 128 KiB bitmap
// (1M chunks), 512-byte logical blocks, writes sized by the logical block
// (lbs512) or by an io_opt of 4 KiB (io4096, the page size here, so that
// sub-page tracking saves nothing there). Variant whole-page is the
// baseline of sub-page in each group.
func BenchmarkFlush(b *testing.B) {
	for _, c := range []struct {
		name string
		io   uint32
		mode FlushMode
	}{
		{"lbs512/whole-page", 0, WholePage},
		{"lbs512/sub-page", 0, SubPage},
		{"io4096/whole-page", 4096, WholePage},
		{"io4096/sub-page", 4096, SubPage},
	} {
		b.Run(c.name, func(b *testing.B) {
			g := v12(256+(128<<10), 512, c.io, RuleLatest)
			d, err := NewDirtyTracker(g)
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(7, 8))
			buf := make([]Extent, 0, 64)
			var written, flushes uint64
			for b.Loop() {
				for k := 0; k < 16; k++ {
					d.MarkChunk(uint64(r.IntN(1 << 20)))
				}
				buf, _ = d.Flush(c.mode, buf[:0])
				for _, e := range buf {
					written += e.Len
				}
				flushes++
			}
			b.ReportMetric(float64(written)/float64(flushes), "B/flush")
		})
	}
}
