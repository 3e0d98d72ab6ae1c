package bitmap

import (
	"errors"
	"testing"
)

// Geometries used below (sectors):
//
//	v12:  1.2 member, sb at 8, bitmap at +8 (sector 16), data at 2048.
//	v10:  1.0 member of 1 GiB: sb at (2097152-16)&^7 = 2097136, bitmap at
//	      -16 (sector 2097120), data 0..2097120.
//	v10p: 1.0 with a positive offset (+2, "DATA METADATA BITMAP").
func v12(bytes uint64, lbs, io uint32, rule WriteRule) WriteGeometry {
	return WriteGeometry{StorageBytes: bytes, SuperStart: 8, Offset: 8, DataOffset: 2048,
		DataSectors: 1 << 20, LogicalBlock: lbs, IOOpt: io, Rule: rule}
}

func v10(bytes uint64, lbs, io uint32, rule WriteRule) WriteGeometry {
	return WriteGeometry{StorageBytes: bytes, SuperStart: 2097136, Offset: -16, DataOffset: 0,
		DataSectors: 2097120, LogicalBlock: lbs, IOOpt: io, Rule: rule}
}

func TestPlacement(t *testing.T) {
	g := v12(258, 512, 0, RuleLatest)
	if p := g.Placement(); p != MetadataBitmapData {
		t.Errorf("1.2: %v", p)
	}
	if b, ok := g.Boundary(); !ok || b != 2048 || g.Start() != 16 {
		t.Errorf("1.2 boundary %d %v start %d", b, ok, g.Start())
	}
	g = v10(258, 512, 0, RuleLatest)
	if p := g.Placement(); p != DataBitmapMetadata {
		t.Errorf("1.0: %v", p)
	}
	if b, ok := g.Boundary(); !ok || b != 2097136 || g.Start() != 2097120 {
		t.Errorf("1.0 boundary %d %v start %d", b, ok, g.Start())
	}
	g.Offset = 2
	if p := g.Placement(); p != DataMetadataBitmap {
		t.Errorf("1.0 +2: %v", p)
	}
	if _, ok := g.Boundary(); ok {
		t.Errorf("DATA METADATA BITMAP has a boundary")
	}
	g = v12(258, 512, 0, RuleLatest)
	g.SuperStart, g.Offset = 0, 8 // 1.1
	if p := g.Placement(); p != MetadataBitmapData {
		t.Errorf("1.1: %v", p)
	}
}

func TestPageWriteSize(t *testing.T) {
	// 40256 bytes = 256 + 40000 (320000 chunks): 10 pages, last 3392 bytes.
	const multi = 40256
	mod := func(g WriteGeometry, f func(*WriteGeometry)) WriteGeometry { f(&g); return g }
	tests := []struct {
		name string
		g    WriteGeometry
		pg   uint64
		want uint64
		fit  string // expected FitError text, "" for success
	}{
		// METADATA BITMAP DATA (1.1/1.2)
		{name: "1.2 one page lbs 512 6.1", g: v12(258, 512, 0, RuleLinux61), want: 512},
		{name: "1.2 one page lbs 4096 6.1", g: v12(258, 4096, 0, RuleLinux61), want: 4096},
		{name: "1.2 io_opt ignored by 6.1", g: v12(258, 512, 4096, RuleLinux61), want: 512},
		{name: "1.2 io_opt 4096 6.4", g: v12(258, 512, 4096, RuleLinux64), want: 4096},
		{name: "1.2 io_opt 4096 latest", g: v12(258, 512, 4096, RuleLatest), want: 4096},
		{name: "1.2 io_opt 64K 6.4 uncapped", g: v12(258, 512, 65536, RuleLinux64), want: 65536},
		{name: "1.2 io_opt 64K latest capped", g: v12(258, 512, 65536, RuleLatest), want: 4096},
		{name: "1.2 io_opt == lbs: no expansion", g: v12(258, 4096, 4096, RuleLatest), want: 4096},
		{name: "1.2 io_opt < lbs: no expansion", g: v12(258, 4096, 512, RuleLatest), want: 4096},
		{name: "1.2 io_opt larger than room -> lbs size",
			g: mod(v12(258, 512, 65536, RuleLinux64), func(g *WriteGeometry) { g.DataOffset = 24 }), want: 512},
		{name: "1.2 io_opt fits exactly",
			g: mod(v12(258, 512, 4096, RuleLinux64), func(g *WriteGeometry) { g.DataOffset = 24 }), want: 4096},
		{name: "1.2 io_opt one sector too many",
			g: mod(v12(258, 512, 4096, RuleLinux64), func(g *WriteGeometry) { g.DataOffset = 23 }), want: 512},
		{name: "1.2 lbs write fits exactly",
			g: mod(v12(258, 512, 0, RuleLinux61), func(g *WriteGeometry) { g.DataOffset = 17 }), want: 512},
		{name: "1.2 bitmap runs into data",
			g:   mod(v12(258, 512, 0, RuleLinux61), func(g *WriteGeometry) { g.DataOffset = 16 }),
			fit: "bitmap runs in to data"},
		{name: "1.2 lbs 4096 does not fit 2 sectors",
			g:   mod(v12(258, 4096, 0, RuleLatest), func(g *WriteGeometry) { g.DataOffset = 18 }),
			fit: "bitmap runs in to data"},
		{name: "physical block stands in for io_opt",
			g: mod(v12(258, 512, 0, RuleLatest), func(g *WriteGeometry) { g.PhysicalBlock = 4096 }), want: 4096},
		{name: "io_opt wins over physical block",
			g: mod(v12(258, 512, 1024, RuleLatest), func(g *WriteGeometry) { g.PhysicalBlock = 4096 }), want: 1024},
		{name: "physical block ignored by 6.1",
			g: mod(v12(258, 512, 0, RuleLinux61), func(g *WriteGeometry) { g.PhysicalBlock = 4096 }), want: 512},

		// Multi-page bitmap, partial last page.
		{name: "multi page 0", g: v12(multi, 512, 0, RuleLinux61), pg: 0, want: 4096},
		{name: "multi page 8", g: v12(multi, 512, 0, RuleLinux61), pg: 8, want: 4096},
		{name: "multi last page lbs 512", g: v12(multi, 512, 0, RuleLinux61), pg: 9, want: 3584},
		{name: "multi last page lbs 4096", g: v12(multi, 4096, 0, RuleLinux61), pg: 9, want: 4096},
		{name: "multi last page io 8192 6.4", g: v12(multi, 512, 8192, RuleLinux64), pg: 9, want: 8192},
		{name: "multi last page io 8192 latest", g: v12(multi, 512, 8192, RuleLatest), pg: 9, want: 4096},
		{name: "multi non-last page io 8192 unchanged", g: v12(multi, 512, 8192, RuleLinux64), pg: 3, want: 4096},
		{name: "multi last page io does not fit",
			// bitmap 16..95 (79 sectors of lbs-rounded bitmap), data at 95:
			// opt 4096 would end at 96.
			g: mod(v12(multi, 512, 4096, RuleLatest), func(g *WriteGeometry) { g.DataOffset = 95 }), pg: 9, want: 3584},
		{name: "multi page 0 runs into data",
			g:   mod(v12(multi, 512, 0, RuleLatest), func(g *WriteGeometry) { g.DataOffset = 20 }),
			pg:  0,
			fit: "bitmap runs in to data"},
		{name: "exactly two pages: last is whole", g: v12(8192, 512, 0, RuleLinux61), pg: 1, want: 4096},

		// DATA BITMAP METADATA (1.0, bitmap before the superblock)
		{name: "1.0 lbs 512", g: v10(258, 512, 0, RuleLinux61), want: 512},
		{name: "1.0 io 4096 fits before sb", g: v10(258, 512, 4096, RuleLinux64), want: 4096},
		{name: "1.0 io 16K crosses sb -> lbs", g: v10(258, 512, 16384, RuleLinux64), want: 512},
		{name: "1.0 io 8K ends exactly at sb", g: v10(258, 512, 8192, RuleLinux64), want: 8192},
		{name: "1.0 io 8K latest capped", g: v10(258, 512, 8192, RuleLatest), want: 4096},
		{name: "1.0 data ends at bitmap start", g: v10(258, 512, 0, RuleLinux61), want: 512},
		{name: "1.0 data runs into bitmap",
			g:   mod(v10(258, 512, 0, RuleLinux61), func(g *WriteGeometry) { g.DataSectors++ }),
			fit: "data runs in to bitmap"},
		{name: "1.0 bitmap runs into metadata",
			g:   mod(v10(258, 4096, 0, RuleLinux61), func(g *WriteGeometry) { g.Offset = -4; g.DataSectors = 2097132 }),
			fit: "bitmap runs in to metadata"},
		{name: "1.0 offset -1 lbs 512 fits",
			g: mod(v10(258, 512, 0, RuleLinux61), func(g *WriteGeometry) { g.Offset = -1; g.DataSectors = 2097135 }), want: 512},

		// DATA METADATA BITMAP: no checks, no io_opt expansion.
		{name: "1.0 positive offset ignores io_opt",
			g: mod(v10(258, 512, 4096, RuleLatest), func(g *WriteGeometry) { g.Offset = 2 }), want: 512},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.g.PageWriteSize(tt.pg)
			if tt.fit != "" {
				var fe *FitError
				if !errors.As(err, &fe) || fe.Msg != tt.fit || fe.Page != tt.pg || !errors.Is(err, ErrNoFit) {
					t.Fatalf("got %d, %v; want FitError %q", got, err, tt.fit)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestPageWriteSizeBadGeometry(t *testing.T) {
	for _, g := range []WriteGeometry{
		v12(258, 0, 0, RuleLatest),
		v12(258, 1000, 0, RuleLatest),
		v12(258, 256, 0, RuleLatest),
		v12(100, 512, 0, RuleLatest),
		func() WriteGeometry { g := v12(258, 512, 0, RuleLatest); g.PhysicalBlock = 3000; return g }(),
	} {
		if _, err := g.PageWriteSize(0); !errors.Is(err, ErrGeometry) {
			t.Errorf("%+v: got %v, want ErrGeometry", g, err)
		}
	}
	g := v12(258, 512, 0, RuleLatest)
	if _, err := g.PageWriteSize(1); !errors.Is(err, ErrGeometry) {
		t.Errorf("page beyond bitmap: got %v, want ErrGeometry", err)
	}
}

func TestRuleAndPlacementStrings(t *testing.T) {
	if s := RuleLinux61.String(); s != "linux<=6.3" {
		t.Errorf("RuleLinux61 = %q", s)
	}
	if s := DataBitmapMetadata.String(); s != "DATA BITMAP METADATA" {
		t.Errorf("DataBitmapMetadata = %q", s)
	}
	if s := SubPage.String(); s != "sub-page" {
		t.Errorf("SubPage = %q", s)
	}
}
