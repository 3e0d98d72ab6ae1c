package r5log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// TestWriterReproducesKernelIOUnits rebuilds every io_unit the kernel wrote
// in the fixtures from its pages (stripes regrouped from the payloads) and
// checks that the Writer lays out the same meta block, byte for byte, and
// puts the pages at the same log sectors: write-through data+parity
// (raid5, raid6 wrapping the ring), write-back data-only, parity-only and
// flush io_units.
func TestWriterReproducesKernelIOUnits(t *testing.T) {
	for _, name := range []string{"f1-journal.img.gz", "f2-journal.img.gz", "f3-journal.img.gz", "f3-after.img.gz"} {
		fx := loadFixture(t, name)
		seed := fx.seed()
		mapper := fx.mapper()
		log := fx.logArea()
		n := 0
		for off := 0; off+BlockSize <= len(log); off += BlockSize {
			blk := log[off : off+BlockSize]
			m, err := DecodeMeta(seed, blk)
			if err != nil || len(m.Payloads) == 0 {
				continue
			}
			pos := m.Position
			w := Writer{Seed: seed, DevSize: fx.dataSize, Pos: pos, Seq: m.Seq, Tail: pos}
			pagePos := RingAdd(fx.dataSize, pos, BlockSectors)
			next := func() []byte {
				p := log[pagePos*512 : pagePos*512+BlockSize]
				pagePos = RingAdd(fx.dataSize, pagePos, BlockSectors)
				return p
			}
			var cur *StripeWrite
			emit := func() {
				if cur == nil {
					return
				}
				if sealed, err := w.AddStripe(*cur); err != nil || sealed != nil {
					t.Fatalf("%s %d: AddStripe: %v sealed %v", name, pos, err, sealed != nil)
				}
				cur = nil
			}
			for _, p := range m.Payloads {
				switch p.Type {
				case TypeData:
					sect, _ := mapper(p.Location)
					if cur != nil && cur.Sector != sect {
						emit()
					}
					if cur == nil {
						cur = &StripeWrite{Sector: sect}
					}
					cur.Data = append(cur.Data, DataPage{Location: p.Location, Page: next()})
				case TypeParity:
					if cur != nil && cur.Sector != p.Location {
						emit()
					}
					if cur == nil {
						cur = &StripeWrite{Sector: p.Location}
					}
					cur.P = next()
					if len(p.Checksums) == 2 {
						cur.Q = next()
					}
					emit()
				case TypeFlush:
					emit()
					for _, s := range p.FlushStripes {
						if sealed, err := w.AddFlush(s); err != nil || sealed != nil {
							t.Fatal(err)
						}
					}
				}
			}
			emit()
			io := w.Seal()
			if !bytes.Equal(io.Meta, blk) {
				got, _ := DecodeMeta(seed, io.Meta)
				t.Errorf("%s: io_unit at %d differs:\n got %+v\nwant %+v", name, pos, got, m)
				continue
			}
			want := RingAdd(fx.dataSize, pos, BlockSectors)
			for _, pg := range io.Pages {
				if pg.Sector != want {
					t.Errorf("%s: io_unit at %d: page at %d, want %d", name, pos, pg.Sector, want)
				}
				want = RingAdd(fx.dataSize, want, BlockSectors)
			}
			if io.End != want || w.Pos != want || w.Seq != m.Seq+1 {
				t.Errorf("%s: io_unit at %d: end %d writer pos %d seq %d", name, pos, io.End, w.Pos, w.Seq)
			}
			n++
		}
		if n == 0 {
			t.Errorf("%s: no io_units", name)
		}
		t.Logf("%s: %d io_units reproduced", name, n)
	}
}

func TestWriterMetaFull(t *testing.T) {
	seed := uint32(42)
	page := make([]byte, BlockSize)
	// raid6 with 16 data pages per stripe: 16*20 + 16 + 8 = 344 bytes of
	// meta per stripe; (4096-32)/344 = 11 stripes fit.
	var stripes []StripeWrite
	for i := range 30 {
		sw := StripeWrite{Sector: uint64(i) * 8, P: page, Q: page}
		for j := range 16 {
			sw.Data = append(sw.Data, DataPage{Location: uint64(i*16+j) * 8, Page: page})
		}
		stripes = append(stripes, sw)
	}
	ios, err := BuildIO(seed, 100, 0, 1<<20, stripes)
	if err != nil {
		t.Fatal(err)
	}
	if len(ios) != 3 || ios[0].Stripes != 11 || ios[1].Stripes != 11 || ios[2].Stripes != 8 {
		t.Fatalf("io_units %d", len(ios))
	}
	pos := uint64(0)
	for i, io := range ios {
		m, err := DecodeMeta(seed, io.Meta)
		if err != nil {
			t.Fatal(err)
		}
		if m.Seq != uint64(100+i) || m.Position != pos || io.Position != pos {
			t.Errorf("io %d: seq %d pos %d want %d", i, m.Seq, m.Position, pos)
		}
		if int(m.MetaSize) != 32+344*io.Stripes {
			t.Errorf("io %d: meta_size %d", i, m.MetaSize)
		}
		pos = io.End
		if io.End != io.Position+uint64(1+18*io.Stripes)*8 {
			t.Errorf("io %d: end %d", i, io.End)
		}
	}
	// The reservation counts a parity header even for data-only stripes:
	// 4096-32 = 4064 bytes; a 1-page data-only stripe reserves 36 bytes but
	// uses 20.
	w := Writer{Seed: seed, DevSize: 1 << 20}
	one := StripeWrite{Data: []DataPage{{Page: page}}}
	var sealed *IOUnit
	k := 0
	for sealed == nil {
		if sealed, err = w.AddStripe(one); err != nil {
			t.Fatal(err)
		}
		k++
	}
	// 32 + 20*n + 36 > 4096 first for n = 202: the 203rd stripe opens a new
	// io_unit although 20 more bytes would have fitted.
	if k != 203 || sealed.Stripes != 202 || binary.LittleEndian.Uint32(sealed.Meta[offMetaSize:]) != 32+20*202 {
		t.Errorf("k %d stripes %d", k, sealed.Stripes)
	}
}

func TestWriterSpaceAndErrors(t *testing.T) {
	page := make([]byte, BlockSize)
	w := Writer{DevSize: 64, Pos: 0, Tail: 0}
	sw := StripeWrite{Sector: 0, Data: []DataPage{{Page: page}, {Page: page}}, P: page}
	// used 0 + reserve 32 < 64
	if _, err := w.AddStripe(sw); err != nil {
		t.Fatal(err)
	}
	// used 32 (meta + 3 pages) + 32 = 64: not > , no space
	if _, err := w.AddStripe(sw); !errors.Is(err, ErrNoSpace) {
		t.Errorf("want ErrNoSpace, got %v", err)
	}
	w.Tail = 32
	if _, err := w.AddStripe(sw); err != nil {
		t.Errorf("after reclaim: %v", err)
	}
	io := w.Seal()
	if io.Stripes != 2 || io.End != 56 || len(io.Pages) != 6 {
		t.Errorf("io %+v", io)
	}
	if w.Seal() != nil {
		t.Error("double seal")
	}
	bad := []StripeWrite{
		{},
		{Q: page},
		{Data: []DataPage{{Page: page[:10]}}},
		{Data: []DataPage{{Page: page}}, P: page[:1]},
	}
	for i, b := range bad {
		if _, err := w.AddStripe(b); err == nil {
			t.Errorf("bad %d accepted", i)
		}
	}
	if _, err := (&Writer{DevSize: 60}).AddStripe(sw); err == nil {
		t.Error("unaligned DevSize accepted")
	}
	if _, err := (&Writer{DevSize: 64, Pos: 64}).AddFlush(0); err == nil {
		t.Error("Pos outside ring accepted")
	}
	huge := StripeWrite{P: page}
	for range 250 {
		huge.Data = append(huge.Data, DataPage{Page: page})
	}
	if _, err := (&Writer{DevSize: 1 << 20}).AddStripe(huge); err == nil {
		t.Error("oversized stripe accepted")
	}
}

func BenchmarkWriter(b *testing.B) {
	page := make([]byte, BlockSize)
	sw := StripeWrite{Data: []DataPage{{Page: page}, {Page: page}, {Page: page}}, P: page}
	w := Writer{DevSize: 1 << 40}
	b.SetBytes(4 * BlockSize)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w.Tail = w.Pos
		sw.Sector = uint64(i) * 8
		if _, err := w.AddStripe(sw); err != nil {
			b.Fatal(err)
		}
		if i%8 == 7 {
			w.Seal()
		}
	}
}

// IOSize agrees with BuildIO's layout for stripes of every shape.
func TestIOSize(t *testing.T) {
	page := make([]byte, BlockSize)
	for n := 1; n < 120; n += 7 {
		for _, k := range []int{1, 3, 9, 30} {
			for parity := 0; parity <= 2; parity++ {
				var stripes []StripeWrite
				for i := 0; i < n; i++ {
					s := StripeWrite{Sector: uint64(i) * 8}
					for d := 0; d < (i%k)+1; d++ {
						s.Data = append(s.Data, DataPage{Location: uint64(d) * 8, Page: page})
					}
					if parity > 0 {
						s.P = page
					}
					if parity > 1 {
						s.Q = page
					}
					stripes = append(stripes, s)
				}
				metas, sectors := IOSize(stripes)
				ios, err := BuildIO(1, 10, 0, 1<<30, stripes)
				if err != nil {
					t.Fatal(err)
				}
				if uint64(len(ios)) != metas || ios[len(ios)-1].End != sectors {
					t.Fatalf("n %d k %d parity %d: IOSize %d metas %d sectors, BuildIO %d io_units ending at %d",
						n, k, parity, metas, sectors, len(ios), ios[len(ios)-1].End)
				}
			}
		}
	}
}
