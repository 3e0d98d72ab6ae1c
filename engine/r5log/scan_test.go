package r5log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func seqAt(b []byte) uint64 { return binary.LittleEndian.Uint64(b[offSeq:]) }

func xorPages(pages ...[]byte) []byte {
	out := make([]byte, BlockSize)
	for _, p := range pages {
		for i := range out {
			out[i] ^= p[i]
		}
	}
	return out
}

// gfMul2 multiplies every byte by {02} in GF(2^8) mod 0x11d (raid6).
func gfMul2(b []byte) {
	for i, c := range b {
		x := c << 1
		if c&0x80 != 0 {
			x ^= 0x1d
		}
		b[i] = x
	}
}

// checkStripe checks a planned stripe against the fixture: every data page
// is the pattern block its location names, sits on the member the mapper
// gives, and P (and Q) are the parity of the stripe's data (all fixture
// stripes were full-stripe writes).
func checkStripe(t *testing.T, fx *fixture, tag string, s Stripe, full bool) {
	t.Helper()
	log := fx.logArea()
	page := func(off int64) []byte { return log[off : off+BlockSize] }
	m := fx.mapper()
	for i, d := range s.Data {
		if i > 0 && s.Data[i-1].Dev >= d.Dev {
			t.Errorf("stripe %d: data not sorted by dev", s.Sector)
		}
		sect, dev := m(d.Location)
		if sect != s.Sector || dev != d.Dev {
			t.Errorf("stripe %d: location %d maps to (%d, %d), plan says dev %d", s.Sector, d.Location, sect, dev, d.Dev)
		}
		if want := patternBlock(tag, int(d.Location/8)); !bytes.Equal(page(d.Off), want) {
			t.Errorf("stripe %d dev %d: page at %d is not pattern block %d", s.Sector, d.Dev, d.Off/512, d.Location/8)
		}
		if Checksum(fx.seed(), page(d.Off)) != d.Checksum {
			t.Errorf("stripe %d dev %d: checksum", s.Sector, d.Dev)
		}
	}
	if !full {
		return
	}
	data := fx.raidDisks - fx.maxDegraded()
	if len(s.Data) != data {
		t.Fatalf("stripe %d: %d data pages, want %d", s.Sector, len(s.Data), data)
	}
	if s.P < 0 {
		t.Fatalf("stripe %d: no P", s.Sector)
	}
	var pages [][]byte
	for _, d := range s.Data {
		pages = append(pages, page(d.Off))
	}
	if !bytes.Equal(page(s.P), xorPages(pages...)) {
		t.Errorf("stripe %d: P is not the XOR of the data", s.Sector)
	}
	if fx.maxDegraded() == 1 {
		if s.Q != -1 {
			t.Errorf("stripe %d: Q on raid5", s.Sector)
		}
		return
	}
	// raid6 left-symmetric: data index k lives on member (pd+2+k)%n and
	// has syndrome coefficient g^k.
	n := fx.raidDisks
	pd := fx.pdIdx(s.Sector)
	byDev := map[int][]byte{}
	for _, d := range s.Data {
		byDev[d.Dev] = page(d.Off)
	}
	q := make([]byte, BlockSize)
	for k := data - 1; k >= 0; k-- {
		gfMul2(q)
		d := byDev[(pd+2+k)%n]
		for i := range q {
			q[i] ^= d[i]
		}
	}
	if s.Q < 0 || !bytes.Equal(page(s.Q), q) {
		t.Errorf("stripe %d: Q is not the syndrome of the data", s.Sector)
	}
}

func kernelLine(t *testing.T, name string) string {
	l := dmesgLine(t, name)
	return l
}

// TestScanF1: raid5 write-through, crashed with 9 io_units (72 stripes)
// after journal_tail.
func TestScanF1(t *testing.T) {
	fx := loadFixture(t, "f1-journal.img.gz")
	plan, err := Scan(bytes.NewReader(fx.logArea()), fx.params())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := plan.Message("md0"), kernelLine(t, "f1-dmesg.txt"); got != want {
		t.Errorf("message %q, kernel said %q", got, want)
	}
	if plan.Fresh || plan.Start != 7672 || plan.StartSeq != seqAt(fx.block(7672)) {
		t.Errorf("start %d seq %#x fresh %v", plan.Start, plan.StartSeq, plan.Fresh)
	}
	if len(plan.Replay) != 72 || len(plan.DataOnly) != 0 || plan.MetaBlocks != 9 || plan.Skipped != 0 {
		t.Errorf("replay %d data-only %d meta %d skipped %d", len(plan.Replay), len(plan.DataOnly), plan.MetaBlocks, plan.Skipped)
	}
	if plan.End != 10048 || plan.NextSeq != seqAt(fx.block(9784))+1+10000 {
		t.Errorf("end %d nextseq %#x", plan.End, plan.NextSeq)
	}
	if pos, seq := plan.LogStart(); pos != 10056 || seq != plan.NextSeq+1 {
		t.Errorf("log start %d seq %#x", pos, seq)
	}
	last := int64(-1)
	for _, s := range plan.Replay {
		checkStripe(t, fx, "f1", s, true)
		if s.P <= last {
			t.Errorf("replay not in log order at stripe %d", s.Sector)
		}
		last = s.P
	}
	// What the kernel wrote at array start (cow copy taken after
	// assemble+check+stop): the empty meta block at End with NextSeq, and
	// journal_tail = End.
	after := loadFixture(t, "f1-after.img.gz")
	if !bytes.Equal(after.block(plan.End), EmptyMeta(fx.seed(), plan.NextSeq, plan.End)) {
		t.Error("kernel's block at End differs from EmptyMeta(NextSeq, End)")
	}
	if after.tail != plan.End {
		t.Errorf("kernel's journal_tail %d, plan End %d", after.tail, plan.End)
	}
	if fx.resync != ^uint64(0) {
		t.Errorf("f1 crash image resync_offset %#x, want MaxSector", fx.resync)
	}
}

// TestScanF1Corrupt: one byte of a data page of the third io_unit flipped;
// the kernel drops that io_unit and continues at the block right after its
// meta block, which is a data page: the log ends at 8208, not 8200.
func TestScanF1Corrupt(t *testing.T) {
	fx := loadFixture(t, "f1-journal.img.gz")
	img := bytes.Clone(fx.logArea())
	img[(8200+8*3)*512+100] ^= 0xff
	plan, err := Scan(bytes.NewReader(img), fx.params())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := plan.Message("md0"), kernelLine(t, "f1c-dmesg.txt"); got != want {
		t.Errorf("message %q, kernel said %q", got, want)
	}
	if plan.MetaBlocks != 3 || plan.Skipped != 1 || plan.End != 8208 || plan.NextSeq != seqAt(fx.block(8200))+1+10000 {
		t.Errorf("meta %d skipped %d end %d seq %#x", plan.MetaBlocks, plan.Skipped, plan.End, plan.NextSeq)
	}
	after := loadFixture(t, "f1c-after.img.gz")
	if !bytes.Equal(after.block(8208), EmptyMeta(fx.seed(), plan.NextSeq, 8208)) || after.tail != 8208 {
		t.Errorf("kernel wrote something else at 8208 (tail %d)", after.tail)
	}
	// the dropped io_unit's meta block is still there, untouched
	if !bytes.Equal(after.block(8200), fx.block(8200)) {
		t.Error("block 8200 changed")
	}
}

// TestScanF2: raid6 write-through; the valid log runs across the end of
// the ring (the io_unit at 14120 has its pages at 14128..14328 and 0..104).
func TestScanF2(t *testing.T) {
	fx := loadFixture(t, "f2-journal.img.gz")
	plan, err := Scan(bytes.NewReader(fx.logArea()), fx.params())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := plan.Message("md0"), kernelLine(t, "f2-dmesg.txt"); got != want {
		t.Errorf("message %q, kernel said %q", got, want)
	}
	if plan.Start != 11496 || plan.End != 112 || plan.MetaBlocks != 9 || len(plan.Replay) != 72 || plan.DevSize != 14336 {
		t.Errorf("start %d end %d meta %d replay %d size %d", plan.Start, plan.End, plan.MetaBlocks, len(plan.Replay), plan.DevSize)
	}
	if plan.NextSeq != seqAt(fx.block(14120))+1+10000 {
		t.Errorf("nextseq %#x", plan.NextSeq)
	}
	wrapped := 0
	for _, s := range plan.Replay {
		checkStripe(t, fx, "f2", s, true)
		if s.P < 14120*512 {
			wrapped++
		}
	}
	if wrapped == 0 {
		t.Error("no stripe from the wrapped part of the ring")
	}
	after := loadFixture(t, "f2-after.img.gz")
	if !bytes.Equal(after.block(112), EmptyMeta(fx.seed(), plan.NextSeq, 112)) {
		t.Error("kernel's block at End differs")
	}
	// raid6 created with an initial resync: MD_JOURNAL_CLEAN was not set
	// at that start, so the dirty superblock says resync_offset 0.
	if fx.resync != 0 {
		t.Errorf("f2 resync_offset %#x, want 0", fx.resync)
	}
}

// TestScanF3: raid5 write-back: 80 stripes were flushed (DATA, PARITY,
// FLUSH), 21 stripes are data-only, one of them (288) written again after
// its flush and one page of it (location 800) written twice.
func TestScanF3(t *testing.T) {
	fx := loadFixture(t, "f3-journal.img.gz")
	plan, err := Scan(bytes.NewReader(fx.logArea()), fx.params())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := plan.Message("md0"), kernelLine(t, "f3-dmesg.txt"); got != want {
		t.Errorf("message %q, kernel said %q", got, want)
	}
	if plan.Start != 8 || plan.End != 3320 || plan.MetaBlocks != 39 || len(plan.Replay) != 0 || len(plan.DataOnly) != 21 {
		t.Errorf("start %d end %d meta %d replay %d data-only %d", plan.Start, plan.End, plan.MetaBlocks, len(plan.Replay), len(plan.DataOnly))
	}
	var order []uint64
	for s := uint64(640); s <= 760; s += 8 {
		order = append(order, s)
	}
	order = append(order, 288, 576, 864, 1024, 1032)
	for i, s := range plan.DataOnly {
		if i < len(order) && s.Sector != order[i] {
			t.Errorf("data-only[%d] = %d, want %d", i, s.Sector, order[i])
		}
		if s.P != -1 || s.Q != -1 {
			t.Errorf("data-only stripe %d has parity", s.Sector)
		}
		for _, d := range s.Data {
			k := int(d.Location / 8)
			if d.Location == 800 {
				k = 500 // block 100 was rewritten with pattern block 500
			}
			if !bytes.Equal(fx.logArea()[d.Off:d.Off+BlockSize], patternBlock("f3", k)) {
				t.Errorf("stripe %d dev %d: wrong page", s.Sector, d.Dev)
			}
		}
	}
	// The kernel's rewrite of the data-only stripes, byte for byte.
	after := loadFixture(t, "f3-after.img.gz")
	rws := plan.Rewrites(fx.seed())
	if len(rws) != 21 || rws[0].Pos != 3320 || rws[0].Seq != plan.NextSeq {
		t.Fatalf("rewrites %d", len(rws))
	}
	for _, rw := range rws {
		if !bytes.Equal(after.block(rw.Pos), rw.Meta) {
			m, err := DecodeMeta(fx.seed(), after.block(rw.Pos))
			mine, _ := DecodeMeta(fx.seed(), rw.Meta)
			t.Errorf("rewrite meta at %d differs: kernel %+v (%v), mine %+v", rw.Pos, m, err, mine)
		}
		for _, pc := range rw.Pages {
			if !bytes.Equal(after.block(pc.To), fx.logArea()[pc.From:pc.From+BlockSize]) {
				t.Errorf("rewritten page at %d differs", pc.To)
			}
		}
	}
	// The write-out that follows starts right after the rewrites.
	pos, seq := plan.LogStart()
	if pos != 3920 || seqAt(after.block(pos)) != seq {
		t.Errorf("log start %d seq %#x; kernel's next block seq %#x", pos, seq, seqAt(after.block(pos)))
	}
	if m, err := DecodeMeta(fx.seed(), after.block(pos)); err != nil || m.Payloads[0].Type != TypeParity {
		t.Errorf("kernel's first block after the rewrite: %+v %v", m, err)
	}
}

func TestScanFixturesUnlimitedCache(t *testing.T) {
	// The fixtures never fill a 256-stripe cache bucket: the plan must not
	// depend on the cache model.
	for _, name := range []string{"f1-journal.img.gz", "f2-journal.img.gz", "f3-journal.img.gz"} {
		fx := loadFixture(t, name)
		p := fx.params()
		a, err := Scan(bytes.NewReader(fx.logArea()), p)
		if err != nil {
			t.Fatal(err)
		}
		p.StripeCache = -1
		b, err := Scan(bytes.NewReader(fx.logArea()), p)
		if err != nil {
			t.Fatal(err)
		}
		if a.CacheGrowths != 0 || len(a.Replay) != len(b.Replay) || len(a.DataOnly) != len(b.DataOnly) {
			t.Errorf("%s: cache model changed the plan", name)
		}
	}
}

// --- synthetic logs built with the Writer ---

type synth struct {
	t    *testing.T
	fx   *fixture // geometry only
	seed uint32
	w    Writer
	log  []byte
}

func newSynth(t *testing.T, devSize, pos uint64, level int) *synth {
	fx := &fixture{level: level, raidDisks: 4, chunk: 128}
	if level == 6 {
		fx.raidDisks = 5
	}
	s := &synth{t: t, fx: fx, seed: 0x1234abcd, log: make([]byte, devSize*512)}
	s.w = Writer{Seed: s.seed, DevSize: devSize, Pos: pos, Seq: 1000, Tail: pos}
	// the block at the tail: an empty meta block, as after a clean start
	copy(s.log[pos*512:], EmptyMeta(s.seed, 999, pos))
	s.w.Pos = RingAdd(devSize, pos, 8)
	return s
}

func (s *synth) params(tail uint64) Params {
	return Params{DevSectors: uint64(len(s.log) / 512), Tail: tail, Seed: s.seed, MaxDegraded: s.fx.maxDegraded(), Map: s.fx.mapper()}
}

func fill(b byte) []byte { return bytes.Repeat([]byte{b}, BlockSize) }

// stripe builds a StripeWrite for stripe row r (stripe sector r*8 within
// chunk row 0 for r < 16) with data on the given chunk indexes.
func (s *synth) stripe(sect uint64, chunks []int, parity bool, tag byte) StripeWrite {
	sw := StripeWrite{Sector: sect}
	row := sect / s.fx.chunk
	data := uint64(s.fx.raidDisks - s.fx.maxDegraded())
	for _, c := range chunks {
		loc := (row*data+uint64(c))*s.fx.chunk + sect%s.fx.chunk
		sw.Data = append(sw.Data, DataPage{Location: loc, Page: fill(tag + byte(c))})
	}
	if parity {
		sw.P = fill(tag ^ 0x80)
		if s.fx.level == 6 {
			sw.Q = fill(tag ^ 0x40)
		}
	}
	return sw
}

func (s *synth) put(io *IOUnit) {
	if io == nil {
		return
	}
	copy(s.log[io.Position*512:], io.Meta)
	for _, p := range io.Pages {
		copy(s.log[p.Sector*512:], p.Page)
	}
}

func (s *synth) add(sw StripeWrite) {
	sealed, err := s.w.AddStripe(sw)
	if err != nil {
		s.t.Fatal(err)
	}
	s.put(sealed)
}

func (s *synth) flush(sect uint64) {
	sealed, err := s.w.AddFlush(sect)
	if err != nil {
		s.t.Fatal(err)
	}
	s.put(sealed)
}

func (s *synth) seal() { s.put(s.w.Seal()) }

func (s *synth) scan(tail uint64, cache int) Plan {
	p := s.params(tail)
	p.StripeCache = cache
	plan, err := Scan(bytes.NewReader(s.log), p)
	if err != nil {
		s.t.Fatal(err)
	}
	return plan
}

func sectors(ss []Stripe) []uint64 {
	var out []uint64
	for _, s := range ss {
		out = append(out, s.Sector)
	}
	return out
}

func eq(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestScanStripeSeenAgain(t *testing.T) {
	s := newSynth(t, 4096, 0, 5)
	s.add(s.stripe(0, []int{0, 1, 2}, true, 1))
	s.add(s.stripe(8, []int{0, 1, 2}, true, 2))
	s.seal()
	s.add(s.stripe(0, []int{1}, true, 3)) // stripe 0 again, one page
	s.seal()
	plan := s.scan(0, 0)
	// The second DATA payload for stripe 0 replays it at once and moves it
	// to the end of the list; stripe 8 and the new stripe 0 follow.
	if got := sectors(plan.Replay); !eq(got, []uint64{0, 8, 0}) {
		t.Fatalf("replay order %v", got)
	}
	if len(plan.Replay[0].Data) != 3 || len(plan.Replay[2].Data) != 1 || plan.Replay[2].Data[0].Dev != 1 {
		t.Errorf("stripe contents %+v", plan.Replay)
	}
	if plan.Message("md9") != "md/raid:md9: recovering 0 data-only stripes and 3 data-parity stripes" {
		t.Error(plan.Message("md9"))
	}
	if plan.End != s.w.Pos || plan.NextSeq != s.w.Seq+10000 || plan.MetaBlocks != 3 {
		t.Errorf("end %d/%d seq %d/%d meta %d", plan.End, s.w.Pos, plan.NextSeq, s.w.Seq+10000, plan.MetaBlocks)
	}
}

func TestScanWriteBackRules(t *testing.T) {
	s := newSynth(t, 4096, 0, 5)
	s.add(s.stripe(0, []int{0}, false, 1))     // data-only A
	s.add(s.stripe(8, []int{1}, false, 2))     // data-only B
	s.add(s.stripe(16, []int{2}, false, 3))    // data-only C, later flushed
	s.add(s.stripe(8, []int{1}, false, 4))     // B's page again: replaced
	s.add(StripeWrite{Sector: 24, P: fill(9)}) // parity without data: never written
	s.seal()
	s.add(StripeWrite{Sector: 16, P: fill(5)}) // C gets parity
	s.add(StripeWrite{Sector: 0, P: fill(6)})  // A gets parity
	s.seal()
	s.flush(16) // C reached the members
	s.seal()
	plan := s.scan(0, 0)
	if got := sectors(plan.Replay); !eq(got, []uint64{0}) {
		t.Errorf("replay %v", got)
	}
	if got := sectors(plan.DataOnly); !eq(got, []uint64{8}) {
		t.Errorf("data-only %v", got)
	}
	b := plan.DataOnly[0].Data
	if len(b) != 1 || !bytes.Equal(s.log[b[0].Off:b[0].Off+BlockSize], fill(5)) {
		t.Errorf("B's page is not the last one written")
	}
	rw := plan.Rewrites(s.seed)
	if len(rw) != 1 || rw[0].Pos != plan.End || rw[0].Seq != plan.NextSeq || rw[0].Pages[0].To != plan.End+8 {
		t.Errorf("rewrites %+v", rw)
	}
	m, err := DecodeMeta(s.seed, rw[0].Meta)
	if err != nil || len(m.Payloads) != 1 || m.Payloads[0].Checksums[0] != Checksum(s.seed, fill(5)) {
		t.Errorf("rewrite meta %+v %v", m, err)
	}
	if pos, seq := plan.LogStart(); pos != plan.End+16 || seq != plan.NextSeq+1 {
		t.Errorf("log start %d %d", pos, seq)
	}
}

func TestScanRaid6Wrap(t *testing.T) {
	// 128-sector ring; start near the end so that io_units wrap.
	s := newSynth(t, 128, 112, 6)
	s.add(s.stripe(0, []int{0, 1, 2}, true, 1)) // meta 120, data 0..16, P 24, Q 32
	s.seal()
	s.add(s.stripe(8, []int{0}, true, 2)) // meta 40, D 48, P 56, Q 64
	s.seal()
	plan := s.scan(112, 0)
	if got := sectors(plan.Replay); !eq(got, []uint64{0, 8}) {
		t.Fatalf("replay %v", got)
	}
	st := plan.Replay[0]
	if st.Data[0].Off != 0 || st.P != 24*512 || st.Q != 32*512 {
		t.Errorf("wrapped offsets %+v", st)
	}
	if plan.End != s.w.Pos || plan.End != 72 {
		t.Errorf("end %d writer %d", plan.End, s.w.Pos)
	}
	// an io_unit whose meta block sits in the last block
	s2 := newSynth(t, 64, 48, 6)
	s2.add(s2.stripe(0, []int{0}, true, 1)) // meta 56, D 0, P 8, Q 16
	s2.seal()
	p2 := s2.scan(48, 0)
	if len(p2.Replay) != 1 || p2.Replay[0].Data[0].Off != 0 || p2.Replay[0].Q != 16*512 || p2.End != 24 {
		t.Errorf("%+v", p2)
	}
}

func TestScanChecksumMismatch(t *testing.T) {
	s := newSynth(t, 4096, 0, 5)
	s.add(s.stripe(0, []int{0, 1, 2}, true, 1))
	s.seal()
	s.add(s.stripe(8, []int{0, 1, 2}, true, 2))
	s.seal()
	s.add(s.stripe(16, []int{0, 1, 2}, true, 3))
	s.seal()
	// corrupt the parity page of the second io_unit (meta at 48)
	s.log[(48+8*4)*512] ^= 1
	plan := s.scan(0, 0)
	if len(plan.Replay) != 1 || plan.Skipped != 1 || plan.MetaBlocks != 3 || plan.End != 56 {
		t.Errorf("replay %d skipped %d meta %d end %d", len(plan.Replay), plan.Skipped, plan.MetaBlocks, plan.End)
	}
	// raid6: a bad Q is caught too
	s6 := newSynth(t, 4096, 0, 6)
	s6.add(s6.stripe(0, []int{0, 1, 2}, true, 1))
	s6.seal()
	s6.log[(8+8*5)*512+7] ^= 1 // Q page
	if p := s6.scan(0, 0); len(p.Replay) != 0 || p.Skipped != 1 || p.End != 16 {
		t.Errorf("raid6 Q: %+v", p)
	}
	// a meta block with only flush payloads is followed directly by the
	// next meta block, so a skipped one does not end the log
	s3 := newSynth(t, 4096, 0, 5)
	s3.flush(8)
	s3.seal() // meta at 8
	s3.add(s3.stripe(0, []int{0}, true, 1))
	s3.seal() // meta at 16
	mb := s3.log[8*512 : 8*512+BlockSize]
	binary.LittleEndian.PutUint16(mb[32:], 7) // unknown payload type
	binary.LittleEndian.PutUint32(mb[4:], MetaChecksum(s3.seed, mb))
	if p := s3.scan(0, 0); p.Skipped != 1 || len(p.Replay) != 1 || p.End != 40 {
		t.Errorf("flush-only skip: %+v", p)
	}
}

func TestScanFresh(t *testing.T) {
	s := newSynth(t, 4096, 0, 5)
	s.add(s.stripe(0, []int{0, 1, 2}, true, 1))
	s.seal()
	for _, tc := range []struct {
		name  string
		tail  uint64
		fresh bool
		start uint64
	}{
		{"valid", 0, false, 0},
		{"unaligned tail resets to 0", 3, false, 0},
		{"tail beyond the log resets to 0", 5000, false, 0},
		{"tail at a data page", 16, true, 16},
		{"tail at an empty block", 800, true, 800},
		{"tail at a later meta block", 8, false, 8},
	} {
		p := s.scan(tc.tail, 0)
		if p.Fresh != tc.fresh || p.Start != tc.start {
			t.Errorf("%s: fresh %v start %d", tc.name, p.Fresh, p.Start)
		}
		if p.Fresh && (p.End != 0 || p.NextSeq != 0 || p.Message("md0") != "" || len(p.Replay) != 0) {
			t.Errorf("%s: fresh plan %+v", tc.name, p)
		}
	}
	// position mismatch: copy the meta block at 8 to 40
	copy(s.log[40*512:], s.log[8*512:8*512+BlockSize])
	if p := s.scan(40, 0); !p.Fresh {
		t.Error("moved meta block accepted")
	}
	// a clean log: one empty block
	c := newSynth(t, 4096, 800, 5)
	p := c.scan(800, 0)
	if p.Message("md0") != "md/raid:md0: starting from clean shutdown" || p.End != 808 || p.NextSeq != 999+1+10000 {
		t.Errorf("clean: %+v %q", p, p.Message("md0"))
	}
	if pos, _ := (&Plan{Fresh: true}).LogStart(); pos != 8 {
		t.Error("fresh log start")
	}
}

func TestScanStripeCachePressure(t *testing.T) {
	// Cache of 8 stripes: one per hash bucket. Stripe sectors 0 and 64
	// share bucket 0.
	s := newSynth(t, 4096, 0, 5)
	s.add(s.stripe(0, []int{0, 1, 2}, true, 1))
	s.add(s.stripe(8, []int{0}, false, 2)) // bucket 1, data-only
	s.add(s.stripe(64, []int{0, 1, 2}, true, 3))
	s.seal()
	s.flush(0) // too late: stripe 0 was already replayed to make room
	s.seal()
	p := s.scan(0, 8)
	if got := sectors(p.Replay); !eq(got, []uint64{0, 64}) || p.CacheGrowths != 0 {
		t.Errorf("cache 8: replay %v growths %d", got, p.CacheGrowths)
	}
	if got := sectors(p.DataOnly); !eq(got, []uint64{8}) {
		t.Errorf("data-only %v", got)
	}
	// With the default cache the flush payload drops stripe 0.
	p = s.scan(0, 0)
	if got := sectors(p.Replay); !eq(got, []uint64{64}) {
		t.Errorf("cache 256: replay %v", got)
	}
	// Data-only stripes cannot be replayed: the cache doubles.
	d := newSynth(t, 4096, 0, 5)
	d.add(d.stripe(0, []int{0}, false, 1))
	d.add(d.stripe(64, []int{0}, false, 2))
	d.add(d.stripe(128, []int{0}, false, 3))
	d.seal()
	p = d.scan(0, 8)
	if p.CacheGrowths != 2 || len(p.DataOnly) != 3 {
		t.Errorf("growths %d data-only %d", p.CacheGrowths, len(p.DataOnly))
	}
	if p = d.scan(0, 0); p.CacheGrowths != 0 || len(p.DataOnly) != 3 {
		t.Errorf("default cache grew")
	}
}

func TestScanStripeCacheLimit(t *testing.T) {
	// 1 stripe per bucket at 8; doubling past 32768 fails like the kernel.
	s := newSynth(t, 4096, 0, 5)
	// 2 data-only stripes in one bucket with a cache that cannot double.
	s.add(s.stripe(0, []int{0}, false, 1))
	s.add(s.stripe(64, []int{0}, false, 2))
	s.seal()
	p := s.params(0)
	p.StripeCache = 8
	plan, err := Scan(bytes.NewReader(s.log), p)
	if err != nil || plan.CacheGrowths != 1 {
		t.Fatalf("%v %d", err, plan.CacheGrowths)
	}
	// Simulate the limit with a cache already at 32768 and a full bucket.
	sc := &scanner{cache: 32768, bySect: map[uint64]*rstripe{}}
	sc.active[0] = capacity(32768, 0)
	if _, err := sc.alloc(0); !errors.Is(err, ErrStripeCache) {
		t.Errorf("limit: %v", err)
	}
}

func TestScanParams(t *testing.T) {
	s := newSynth(t, 64, 0, 5)
	p := s.params(0)
	p.MaxDegraded = 3
	if _, err := Scan(bytes.NewReader(s.log), p); err == nil {
		t.Error("MaxDegraded 3 accepted")
	}
	p = s.params(0)
	p.Map = nil
	if _, err := Scan(bytes.NewReader(s.log), p); err == nil {
		t.Error("nil mapper accepted")
	}
	p = s.params(0)
	if _, err := Scan(bytes.NewReader(s.log[:100]), p); err == nil || !strings.Contains(err.Error(), "sector 0") {
		t.Errorf("short log: %v", err)
	}
}

// FuzzScan: Scan must not panic on any log. The input is cut into 4 KiB
// blocks of a small ring; blocks starting with the magic get their
// checksum fixed so that the payload paths are reached.
func FuzzScan(f *testing.F) {
	s := newSynth(&testing.T{}, 64, 0, 5)
	s.add(s.stripe(0, []int{0, 1}, true, 1))
	s.seal()
	s.flush(0)
	s.seal()
	f.Add(s.log[:48*512], uint8(0), false)
	f.Add(s.log, uint8(1), true)
	f.Fuzz(func(t *testing.T, b []byte, tail uint8, raid6 bool) {
		if len(b) > 16*BlockSize {
			b = b[:16*BlockSize]
		}
		n := (len(b) + BlockSize - 1) / BlockSize
		if n == 0 {
			return
		}
		log := make([]byte, n*BlockSize)
		copy(log, b)
		seed := uint32(0x1234abcd)
		for off := 0; off < len(log); off += BlockSize {
			blk := log[off : off+BlockSize]
			if binary.LittleEndian.Uint32(blk) == Magic {
				binary.LittleEndian.PutUint32(blk[offChecksum:], MetaChecksum(seed, blk))
			}
		}
		fx := &fixture{level: 5, raidDisks: 4, chunk: 128}
		md := 1
		if raid6 {
			fx.level, fx.raidDisks, md = 6, 5, 2
		}
		for _, cache := range []int{8, -1} {
			p := Params{DevSectors: uint64(n * 8), Tail: uint64(tail), Seed: seed, MaxDegraded: md, Map: fx.mapper(), StripeCache: cache}
			plan, err := Scan(bytes.NewReader(log), p)
			if err != nil {
				continue
			}
			_ = plan.Rewrites(seed)
			_, _ = plan.LogStart()
			_ = plan.Message("md0")
		}
	})
}
