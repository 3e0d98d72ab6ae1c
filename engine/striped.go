package engine

import (
	"fmt"
	"sync"

	"mdtool/engine/layout"
	"mdtool/engine/parity"
	"mdtool/engine/r5log"
)

// stripedPers serves raid4, raid5 and raid6.
//
// Writes arrive split at stripe boundaries (Array.pieces): a piece is
// either whole stripes, whose parity is computed from the caller's buffer
// alone and written without any member read, or a part of one stripe,
// written by read-modify-write or reconstruct-write, whichever reads less
// (md's handle_stripe_dirtying), or by rebuilding missing blocks first
// when the stripe is degraded. Locks are per stripe and per sector range
// within it, so writes to different columns of a stripe run in parallel.
// Reads go straight to the data members; a missing or failing member's
// blocks are rebuilt from the others under the stripe lock.
type stripedPers struct {
	a  *Array
	g  *layout.Striped
	r6 bool
	// newOff: the new geometry of a reshape, whose data starts at the
	// members' new data offset.
	newOff bool
	// mover: the reshape's own stripe writes, which set no bitmap bits
	// (md marks only user writes: add_stripe_bio).
	mover bool
}

// off is where m's data area starts for this geometry (bytes).
func (sp *stripedPers) off(m *member) int64 {
	if sp.newOff {
		return m.newOff
	}
	return m.dataOff
}

// stripeWork is the per-request scratch of the striped path (pooled).
type stripeWork struct {
	row  layout.Row
	bufs []*buf
	db   [][]byte // per data index: block over the hull
	old  [][]byte // per data index: old data over its written range (rmw)
	syn  [][]byte // per syndrome slot
	xs   [][]byte // scratch source list
	have []bool   // per data index: db holds valid (old) data
	wlo  []uint64 // per data index: written range in the chunk (wlo == whi: none)
	whi  []uint64
	olo  []uint64 // per data index: written range of the whole request
	ohi  []uint64
	bad  []bool // per role: returned a read error in this request
	lost []int
	ol   *opList
	pb   []byte
	qb   []byte
	jc   []r5log.StripeWrite // the write journal's stripes (journal.go)
}

var workPool sync.Pool

func (sp *stripedPers) work() *stripeWork {
	w, _ := workPool.Get().(*stripeWork)
	if w == nil {
		w = &stripeWork{}
	}
	k, n := sp.g.DataDisks(), sp.g.RaidDisks()
	if cap(w.db) < k {
		w.db = make([][]byte, k)
		w.old = make([][]byte, k)
		w.have = make([]bool, k)
		w.wlo = make([]uint64, k)
		w.whi = make([]uint64, k)
	}
	w.db, w.old, w.have, w.wlo, w.whi = w.db[:k], w.old[:k], w.have[:k], w.wlo[:k], w.whi[:k]
	if cap(w.bad) < n {
		w.bad = make([]bool, n)
	}
	w.bad = w.bad[:n]
	clear(w.bad)
	if cap(w.syn) < n {
		w.syn = make([][]byte, n)
		w.xs = make([][]byte, 0, n+1)
	}
	w.ol = getOps()
	return w
}

func (w *stripeWork) alloc(n int) []byte {
	b := getBuf(n)
	w.bufs = append(w.bufs, b)
	return b.b
}

// freeBufs returns the buffers but keeps the work.
func (w *stripeWork) freeBufs() {
	for _, b := range w.bufs {
		putBuf(b)
	}
	clear(w.bufs)
	w.bufs = w.bufs[:0]
	clear(w.db)
	clear(w.old)
	w.pb, w.qb = nil, nil
}

func (w *stripeWork) release() {
	w.freeBufs()
	clear(w.syn[:cap(w.syn)])
	putOps(w.ol)
	w.ol = nil
	workPool.Put(w)
}

func (sp *stripedPers) chunk() uint64 { return sp.g.ChunkSectors() }

// readError is a member read failure inside a stripe operation; the role
// is marked bad in the work and the operation is planned again.
type readError struct{ role int }

func (e *readError) Error() string { return fmt.Sprintf("read error on role %d", e.role) }

func isReadError(err error) bool {
	_, ok := err.(*readError)
	return ok
}

// avail reports whether role holds valid data over member sectors
// [s, s+n) and has not failed a read in this request.
func (sp *stripedPers) avail(w *stripeWork, role int, s, n uint64) bool {
	return !w.bad[role] && sp.a.roles[role].readable(s, n)
}

// runReads runs the read ops in w.ol; a failure marks the role bad and
// returns a *readError.
func (sp *stripedPers) runReads(w *stripeWork, key uint64) error {
	a := sp.a
	a.run(w.ol.ops)
	var err error
	for i := range w.ol.ops {
		op := &w.ol.ops[i]
		if op.err != nil {
			w.bad[op.tag] = true
			a.stats.readErrors.add(key, 1)
			err = &readError{op.tag}
		}
	}
	w.ol.ops = w.ol.ops[:0]
	return err
}

// ---------------------------------------------------------------- reads

func (sp *stripedPers) read(p []byte, sector uint64) error {
	a := sp.a
	c := sp.chunk()
	ol := getOps()
	defer putOps(ol)
	type seg struct {
		pos int
		s   uint64
		n   uint64
	}
	var segArr [4]seg
	dsegs := segArr[:0]
	end := sector + uint64(len(p)>>9)
	for s := sector; s < end; {
		ad := sp.g.Locate(s)
		n := min(c-s%c, end-s)
		m := a.roles[ad.Role]
		pos := int(s-sector) << 9
		if m.readable(ad.Sector, n) {
			ol.add(m, false, sp.off(m)+int64(ad.Sector)<<9, p[pos:pos+int(n)<<9], pos)
		} else {
			dsegs = append(dsegs, seg{pos, s, n})
		}
		s += n
	}
	a.run(ol.ops)
	for i := range ol.ops {
		op := &ol.ops[i]
		if op.err == nil {
			continue
		}
		a.stats.readErrors.add(uint64(op.off), 1)
		bad := op.m
		var err error
		if bad.State() == Faulty {
			// failed (past its end): the whole range from the others
			err = sp.degradedRead(op.bufs[0], sector+uint64(op.tag>>9), bad)
		} else {
			err = retryPages(op, sector+uint64(op.tag>>9), func(b []byte, s uint64, _ error) error {
				return sp.degradedRead(b, s, bad)
			})
		}
		if err != nil {
			return err
		}
	}
	for _, d := range dsegs {
		if err := sp.degradedRead(p[d.pos:d.pos+int(d.n)<<9], d.s, nil); err != nil {
			return err
		}
	}
	return nil
}

// degradedRead rebuilds b (array sectors [s, s+len(b)/512), inside one
// chunk) from the other members of its stripe. bad, when set, is the
// member that failed to read it: afterwards the block is rewritten there
// (md's R5_ReadError -> R5_ReWrite) and checked; a member whose rewrite
// fails becomes faulty.
func (sp *stripedPers) degradedRead(b []byte, s uint64, bad *member) error {
	a := sp.a
	g := sp.g
	c := sp.chunk()
	ad := g.Locate(s)
	lo := s % c
	n := uint64(len(b) >> 9)
	a.lockStripe(ad.Stripe, lo, lo+n)
	defer a.unlockStripe(ad.Stripe, lo, lo+n)
	a.stats.degradedReads.add(ad.Stripe, 1)
	w := sp.work()
	defer w.release()
	if bad != nil {
		w.bad[bad.role] = true
	}
	g.Row(ad.Stripe, &w.row)
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		w.freeBufs()
		for d := range w.have {
			w.have[d] = d != ad.DataIndex && sp.avail(w, w.row.Data[d], ad.Sector, n)
		}
		w.db[ad.DataIndex] = b
		err = sp.gather(w, lo, n, false)
		if err == nil {
			err = sp.rebuild(w, lo, n)
		}
		if !isReadError(err) {
			break
		}
	}
	if err != nil {
		return err
	}
	if a.opts.ReadOnly {
		return nil
	}
	// Repair the members that failed to read data they should hold.
	for d, role := range w.row.Data {
		m := a.roles[role]
		if !w.bad[role] || m == nil || !m.writable() || !m.readable(ad.Sector, n) {
			continue
		}
		sp.rewrite(m, w.db[d], int64(w.row.Sector+lo), n)
	}
	for _, role := range []int{w.row.P, w.row.Q} {
		if role >= 0 && w.bad[role] {
			// A parity block that failed to read: rebuilding it needs the
			// whole stripe; leave it to a resync (check/repair).
			a.opts.Logf("%s: unrepaired read error on parity device %s", mdPrefix(a.level, a.mdName()), a.devName(a.roles[role]))
		}
	}
	return nil
}

// rewrite writes the rebuilt block b back to m at member sector s and
// checks that it reads back.
func (sp *stripedPers) rewrite(m *member, b []byte, s int64, n uint64) {
	a := sp.a
	off := sp.off(m) + s<<9
	chk := getBuf(len(b))
	_, err := m.dev.WriteAt(b, off)
	if err == nil {
		_, err = m.dev.ReadAt(chk.b, off)
	}
	putBuf(chk)
	if err != nil {
		a.failMember(m, err)
		return
	}
	m.corrected.Add(1)
	a.stats.correctedReads.add(uint64(s), 1)
	a.opts.Logf("%s: read error corrected (%d sectors at %d on %s)", mdPrefix(a.level, a.mdName()), n, s+sp.off(m)>>9, a.devName(m))
}

// gather reads, over chunk sectors [lo, lo+n) of the stripe in w.row,
// every data block with have[d] into w.db[d] (allocated when nil) and the
// parity blocks needed to rebuild the others: P, and Q when P is not
// enough (raid6). allParity reads every available parity block.
func (sp *stripedPers) gather(w *stripeWork, lo, n uint64, allParity bool) error {
	a := sp.a
	row := &w.row
	ms := row.Sector + lo
	size := int(n) << 9
	lostData := 0
	for d, role := range row.Data {
		if w.db[d] == nil {
			w.db[d] = w.alloc(size)
		}
		if !w.have[d] {
			lostData++
			continue
		}
		m := a.roles[role]
		w.ol.add(m, false, sp.off(m)+int64(ms)<<9, w.db[d], role)
	}
	pOK := sp.avail(w, row.P, ms, n)
	qOK := sp.r6 && sp.avail(w, row.Q, ms, n)
	w.pb = w.alloc(size)
	if sp.r6 {
		w.qb = w.alloc(size)
	}
	if pOK && (lostData > 0 || allParity) {
		m := a.roles[row.P]
		w.ol.add(m, false, sp.off(m)+int64(ms)<<9, w.pb, row.P)
	}
	if qOK && (allParity || lostData > 1 || (lostData == 1 && !pOK)) {
		m := a.roles[row.Q]
		w.ol.add(m, false, sp.off(m)+int64(ms)<<9, w.qb, row.Q)
	}
	return sp.runReads(w, row.Stripe)
}

// rebuild reconstructs, in place, every data block d with !have[d] from the
// blocks gathered over chunk sectors [lo, lo+n).
func (sp *stripedPers) rebuild(w *stripeWork, lo, n uint64) error {
	row := &w.row
	ms := row.Sector + lo
	w.lost = w.lost[:0]
	for d := range w.db {
		if !w.have[d] {
			if sp.r6 {
				w.lost = append(w.lost, row.Slot[d])
			} else {
				w.lost = append(w.lost, d)
			}
		}
	}
	if len(w.lost) == 0 {
		return nil
	}
	pOK := sp.avail(w, row.P, ms, n)
	if !sp.r6 {
		if len(w.lost) > 1 || !pOK {
			return fmt.Errorf("%w: stripe %d: %d blocks lost", ErrFailed, row.Stripe, len(w.lost)+b2i(!pOK))
		}
		return parity.Recover(w.db, w.pb, nil, w.lost...)
	}
	qOK := sp.avail(w, row.Q, ms, n)
	syn := sp.syndrome(w)
	switch {
	case len(w.lost) == 1 && pOK:
		return parity.Recover(syn, w.pb, nil, w.lost...)
	case len(w.lost) == 1 && qOK:
		w.lost = append(w.lost, parity.P)
		return parity.Recover(syn, w.pb, w.qb, w.lost...)
	case len(w.lost) == 2 && pOK && qOK:
		return parity.Recover(syn, w.pb, w.qb, w.lost...)
	}
	return fmt.Errorf("%w: stripe %d: too many blocks lost", ErrFailed, row.Stripe)
}

// syndrome arranges w.db in syndrome slot order (nil for DDF zero slots).
func (sp *stripedPers) syndrome(w *stripeWork) [][]byte {
	row := &w.row
	syn := w.syn[:len(row.Syndrome)]
	clear(syn)
	for d, slot := range row.Slot {
		syn[slot] = w.db[d]
	}
	return syn
}

// computeParity sets w.pb (and w.qb) from the data blocks in w.db.
func (sp *stripedPers) computeParity(w *stripeWork) {
	if sp.r6 {
		parity.GenPQ(w.pb, w.qb, sp.syndrome(w))
		return
	}
	parity.Xor(w.pb, w.db)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ---------------------------------------------------------------- writes

func (sp *stripedPers) write(p []byte, sector uint64, full, fua bool) error {
	if full {
		return sp.writeFull(p, sector, len(p)/int(sp.g.StripeSectors()<<9), fua, nil)
	}
	return sp.writePartial(p, sector, fua)
}

// writeFull writes whole stripes: parity straight from p, no member reads.
// zeroes, when set, replaces p by member zeroing (WriteZeroes/Discard).
func (sp *stripedPers) writeFull(p []byte, sector uint64, K int, fua bool, zeroes func(m *member, off, n int64) error) error {
	a := sp.a
	g := sp.g
	c := sp.chunk()
	n := g.RaidDisks()
	stripeSec := g.StripeSectors()
	s0 := sector / stripeSec
	ms := s0 * c
	mlen := uint64(K) * c
	bm := a.bm
	if sp.mover {
		bm = noBitmap{}
	}
	if err := bm.StartWrite(ms, mlen); err != nil {
		return err
	}
	for i := 0; i < K; i++ {
		a.lockStripe(s0+uint64(i), 0, c)
	}
	w := sp.work()
	degraded := false
	var err error
	if zeroes != nil {
		for role := 0; role < n; role++ {
			m := a.roles[role]
			if !m.writable() {
				degraded = true
				continue
			}
			if zerr := zeroes(m, sp.off(m)+int64(ms)<<9, int64(mlen)<<9); zerr != nil {
				degraded = true
				if !a.failMember(m, zerr) {
					err = zerr
				}
			}
		}
	} else {
		cb := int(c) << 9
		pAll := w.alloc(K * cb)
		var qAll []byte
		if sp.r6 {
			qAll = w.alloc(K * cb)
		}
		fill := func() {
			for i := 0; i < K; i++ {
				g.Row(s0+uint64(i), &w.row)
				base := i * int(stripeSec<<9)
				for d := range w.row.Data {
					w.db[d] = p[base+d*cb : base+(d+1)*cb]
				}
				w.pb = pAll[i*cb : (i+1)*cb]
				if sp.r6 {
					w.qb = qAll[i*cb : (i+1)*cb]
				}
				sp.computeParity(w)
			}
		}
		var deg bool
		deg, err = sp.fullOpsPerChunk(w, p, pAll, qAll, s0, K, fill)
		degraded = deg || degraded
		for pass := 0; pass < 2 && err == nil; pass++ {
			for i := range w.ol.ops {
				op := &w.ol.ops[i]
				if op.err == nil {
					continue
				}
				degraded = true
				if op.m.writable() { // once per member, not per chunk
					a.stats.writeErrors.add(s0, 1)
					if !a.failMember(op.m, op.err) {
						err = op.err
					}
				}
			}
			if pass == 1 || !fua {
				break
			}
			// FUA: one flush per member once all its chunks are written
			// (a write op without buffers is a flush).
			w.ol.ops = w.ol.ops[:0]
			for role := 0; role < n; role++ {
				if m := a.roles[role]; m.writable() {
					w.ol.ops = append(w.ol.ops, memOp{m: m, write: true, fua: true, off: sp.off(m) + int64(ms)<<9, tag: role})
				}
			}
			a.run(w.ol.ops)
		}
		a.stats.fullStripe.add(s0, uint64(K))
	}
	if err == nil && a.failed.Load() {
		err = ErrFailed
	}
	w.release()
	for i := K - 1; i >= 0; i-- {
		a.unlockStripe(s0+uint64(i), 0, c)
	}
	bm.EndWrite(ms, mlen, !degraded && err == nil)
	return err
}

// fullOpsPerChunk runs a full-stripe write as one op per member chunk,
// as raid0 issues them, so that each member has several writes in
// flight: the data chunks are the caller's bytes and go to the members at
// once; the parity chunks, which fill computes into pAll/qAll (the member
// write buffers) meanwhile, follow. It reports whether a member was
// skipped or not in sync.
func (sp *stripedPers) fullOpsPerChunk(w *stripeWork, p, pAll, qAll []byte, s0 uint64, K int, fill func()) (degraded bool, err error) {
	a, g, c := sp.a, sp.g, sp.chunk()
	cb := int(c) << 9
	stripeBytes := int(g.StripeSectors() << 9)
	addOp := func(role int, b []byte, ms uint64) {
		m := a.roles[role]
		if !m.writable() {
			degraded = true
			return
		}
		if m.State() != InSync && !m.readable(ms, c) {
			degraded = true
		}
		w.ol.add(m, true, sp.off(m)+int64(ms)<<9, b, role)
	}
	for i := 0; i < K; i++ {
		g.Row(s0+uint64(i), &w.row)
		base := i * stripeBytes
		for d, role := range w.row.Data {
			addOp(role, p[base+d*cb:base+(d+1)*cb], w.row.Sector)
		}
	}
	ready := len(w.ol.ops)
	for i := 0; i < K; i++ {
		g.Row(s0+uint64(i), &w.row)
		addOp(w.row.P, pAll[i*cb:(i+1)*cb], w.row.Sector)
		if sp.r6 {
			addOp(w.row.Q, qAll[i*cb:(i+1)*cb], w.row.Sector)
		}
	}
	if a.jnl != nil {
		// write-through journal: parity first, then the log, then the
		// members
		fill()
		u, err := sp.logFull(w, p, pAll, qAll, s0, K)
		if err != nil {
			w.ol.ops = w.ol.ops[:0]
			return degraded, err
		}
		a.run(w.ol.ops)
		a.jnl.applied(u)
		return degraded, nil
	}
	a.runWhile(w.ol.ops, ready, fill)
	return degraded, nil
}

// Partial-stripe plans.
const (
	planRMW = iota
	planRCW
	planRebuild  // read everything available, rebuild the missing blocks, recompute parity
	planDataOnly // no parity left to update
)

// writePartial writes p at sector, inside one stripe. Like md, which
// plans every 4 KiB column of a stripe on its own (one stripe_head each),
// the chunk is cut into column segments in which the set of written data
// blocks is the same, and each segment gets its own read-modify-write or
// reconstruct-write decision.
func (sp *stripedPers) writePartial(p []byte, sector uint64, fua bool) error {
	a := sp.a
	g := sp.g
	c := sp.chunk()
	k := g.DataDisks()
	stripeSec := g.StripeSectors()
	stripe := sector / stripeSec
	rel := sector - stripe*stripeSec
	end := rel + uint64(len(p)>>9)
	w := sp.work()
	defer w.release()
	if cap(w.olo) < k {
		w.olo = make([]uint64, k)
		w.ohi = make([]uint64, k)
	}
	olo, ohi := w.olo[:k], w.ohi[:k]
	lo, hi := c, uint64(0)
	var cuts [4]uint64
	for d := 0; d < k; d++ {
		dlo, dhi := max(rel, uint64(d)*c), min(end, uint64(d+1)*c)
		if dlo >= dhi {
			olo[d], ohi[d] = 0, 0
			continue
		}
		olo[d], ohi[d] = dlo-uint64(d)*c, dhi-uint64(d)*c
		lo, hi = min(lo, olo[d]), max(hi, ohi[d])
	}
	// Segment boundaries: where the first written chunk starts and where
	// the last one ends (every chunk in between is written whole).
	cuts[0], cuts[1], cuts[2], cuts[3] = lo, rel%c, end-(end-1)/c*c, hi
	sortCuts(&cuts)
	ms := stripe*c + lo
	if err := a.bm.StartWrite(ms, hi-lo); err != nil {
		return err
	}
	g.Row(stripe, &w.row)
	var err error
	degraded := false
	for i := 0; i < len(cuts)-1 && err == nil; i++ {
		slo, shi := max(cuts[i], lo), min(cuts[i+1], hi)
		if slo >= shi {
			continue
		}
		any := false
		for d := 0; d < k; d++ {
			w.wlo[d], w.whi[d] = max(olo[d], slo), min(ohi[d], shi)
			if w.wlo[d] >= w.whi[d] {
				w.wlo[d], w.whi[d] = 0, 0
			} else {
				any = true
			}
		}
		if !any {
			continue
		}
		a.lockStripe(stripe, slo, shi)
		for attempt := 0; attempt < 4; attempt++ {
			w.freeBufs()
			var deg bool
			deg, err = sp.partialOnce(w, p, rel, slo, shi, fua)
			degraded = degraded || deg
			if !isReadError(err) {
				break
			}
		}
		a.unlockStripe(stripe, slo, shi)
	}
	a.bm.EndWrite(ms, hi-lo, !degraded && err == nil)
	return err
}

func sortCuts(c *[4]uint64) {
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && c[j] < c[j-1]; j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
}

// newData returns the caller's bytes for data index d (its written range).
func (w *stripeWork) newData(p []byte, rel, c uint64, d int) []byte {
	a := (uint64(d)*c + w.wlo[d] - rel) << 9
	return p[a : a+(w.whi[d]-w.wlo[d])<<9]
}

// partialOnce plans and performs one attempt of a partial-stripe write
// of the column segment [lo, hi) (chunk sectors): what can be read and
// what each plan costs, the plan, its reads and parity, then the writes.
func (sp *stripedPers) partialOnce(w *stripeWork, p []byte, rel, lo, hi uint64, fua bool) (degraded bool, err error) {
	row := &w.row
	av := sp.partialAvail(w, lo, hi)
	degraded = av.failures > 0
	if av.failures > sp.a.maxDegradedStriped() {
		return true, fmt.Errorf("%w: stripe %d has %d blocks missing", ErrFailed, row.Stripe, av.failures)
	}
	plan := sp.partialPlan(&av)
	if plan == planDataOnly && av.missing > 0 {
		// raid5 with P and a data block gone has failed (checked above);
		// raid6 with P, Q gone and a data block missing likewise.
		return true, fmt.Errorf("%w: stripe %d", ErrFailed, row.Stripe)
	}
	switch plan {
	case planRMW:
		err = sp.readModify(w, p, rel, lo, hi)
	case planRCW, planRebuild:
		err = sp.readReconstruct(w, p, rel, lo, hi, plan, &av)
	case planDataOnly:
		sp.a.stats.rcw.add(row.Stripe, 1)
	}
	if err != nil {
		return degraded, err
	}
	wdeg, err := sp.partialWrites(w, p, rel, lo, hi, plan, fua)
	return degraded || wdeg || av.anyBad, err
}

// partialAvail is what a partial-stripe write learns about its segment:
// which blocks can be read, and what each plan costs in member reads.
type partialAvail struct {
	missing          int // data blocks that cannot be read
	failures         int // blocks (data and parity) that cannot be read
	rmwOK, rcwOK     bool
	costRMW, costRCW uint64
	anyBad           bool // a block of the stripe failed to read
	pOK, qOK         bool
}

// partialAvail looks at every block of the segment [lo, hi).
func (sp *stripedPers) partialAvail(w *stripeWork, lo, hi uint64) (av partialAvail) {
	row := &w.row
	n := hi - lo
	ms := row.Sector + lo
	av.rmwOK, av.rcwOK = true, true
	for d, role := range row.Data {
		ok := sp.avail(w, role, ms, n)
		if !ok {
			av.missing++
		}
		if w.bad[role] {
			av.anyBad = true
		}
		if w.whi[d] > w.wlo[d] {
			av.costRMW += w.whi[d] - w.wlo[d]
			if !ok {
				av.rmwOK = false
			}
		}
		if un := n - (w.whi[d] - w.wlo[d]); un > 0 {
			av.costRCW += un
			if !ok {
				av.rcwOK = false
			}
		}
	}
	av.pOK = sp.avail(w, row.P, ms, n)
	av.qOK = sp.r6 && sp.avail(w, row.Q, ms, n)
	if w.bad[row.P] || (sp.r6 && w.bad[row.Q]) {
		av.anyBad = true
	}
	av.costRMW += n
	if sp.r6 {
		av.costRMW += n
	}
	if !av.pOK || (sp.r6 && !av.qOK) {
		av.rmwOK = false
	}
	av.failures = av.missing + b2i(!av.pOK)
	if sp.r6 {
		av.failures += b2i(!av.qOK)
	}
	return av
}

// partialPlan chooses the plan: rebuild after read errors, data only
// without parity, otherwise read-modify-write or reconstruct-write as
// md's rmw_level and the costs say.
func (sp *stripedPers) partialPlan(av *partialAvail) int {
	switch {
	case av.anyBad:
		return planRebuild // rebuild everything so the bad blocks can be rewritten
	case !av.pOK && (!sp.r6 || !av.qOK):
		return planDataOnly
	case av.rmwOK && av.rcwOK:
		switch sp.a.opts.RMW {
		case RMWEnable:
			if av.costRMW < av.costRCW {
				return planRMW
			}
		case RMWPrefer:
			if av.costRMW <= av.costRCW {
				return planRMW
			}
		}
		return planRCW
	case av.rmwOK && sp.a.opts.RMW != RMWDisable:
		return planRMW
	case av.rcwOK:
		return planRCW
	}
	return planRebuild
}

// readModify is read-modify-write: it reads the old data of the written
// ranges and the parity, and folds the delta into P (and Q).
func (sp *stripedPers) readModify(w *stripeWork, p []byte, rel, lo, hi uint64) error {
	a := sp.a
	c := sp.chunk()
	row := &w.row
	ms := row.Sector + lo
	size := int(hi-lo) << 9
	a.stats.rmw.add(row.Stripe, 1)
	for d, role := range row.Data {
		if w.whi[d] == w.wlo[d] {
			continue
		}
		m := a.roles[role]
		w.old[d] = w.alloc(int(w.whi[d]-w.wlo[d]) << 9)
		w.ol.add(m, false, sp.off(m)+int64(row.Sector+w.wlo[d])<<9, w.old[d], role)
	}
	w.pb = w.alloc(size)
	mp := a.roles[row.P]
	w.ol.add(mp, false, sp.off(mp)+int64(ms)<<9, w.pb, row.P)
	if sp.r6 {
		w.qb = w.alloc(size)
		mq := a.roles[row.Q]
		w.ol.add(mq, false, sp.off(mq)+int64(ms)<<9, w.qb, row.Q)
	}
	a.stats.readsForWrite.add(row.Stripe, uint64(len(w.ol.ops)))
	if err := sp.runReads(w, row.Stripe); err != nil {
		return err
	}
	for d := range row.Data {
		if w.whi[d] == w.wlo[d] {
			continue
		}
		nd := w.newData(p, rel, c, d)
		od := w.old[d]
		w.xs = append(w.xs[:0], od, nd)
		parity.Xor(od, w.xs) // od = old ^ new: the delta
		off := int(w.wlo[d]-lo) << 9
		pp := w.pb[off : off+len(od)]
		w.xs = append(w.xs[:0], pp, od)
		parity.Xor(pp, w.xs)
		if sp.r6 {
			parity.MulSliceXor(parity.Coef(row.Slot[d]), od, w.qb[off:off+len(od)])
		}
	}
	return nil
}

// readReconstruct is reconstruct-write (plan planRCW) or a rebuild
// (planRebuild): it reads the data not overwritten (with planRebuild
// everything readable, parity too, and rebuilds the rest), puts the new
// data in and recomputes the parity.
func (sp *stripedPers) readReconstruct(w *stripeWork, p []byte, rel, lo, hi uint64, plan int, av *partialAvail) error {
	a := sp.a
	c := sp.chunk()
	row := &w.row
	n := hi - lo
	ms := row.Sector + lo
	size := int(n) << 9
	if plan == planRCW {
		a.stats.rcw.add(row.Stripe, 1)
	} else {
		a.stats.reconstructW.add(row.Stripe, 1)
	}
	for d, role := range row.Data {
		if plan == planRCW && w.wlo[d] == lo && w.whi[d] == hi {
			// fully overwritten over the hull: use the caller's bytes
			w.db[d] = w.newData(p, rel, c, d)
			w.have[d] = true
			continue
		}
		w.db[d] = w.alloc(size)
		w.have[d] = sp.avail(w, role, ms, n)
		if !w.have[d] {
			continue
		}
		m := a.roles[role]
		base := sp.off(m) + int64(row.Sector)<<9
		if plan == planRCW && w.whi[d] > w.wlo[d] {
			// read only what is not overwritten
			if w.wlo[d] > lo {
				w.ol.add(m, false, base+int64(lo)<<9, w.db[d][:(w.wlo[d]-lo)<<9], role)
			}
			if w.whi[d] < hi {
				w.ol.add(m, false, base+int64(w.whi[d])<<9, w.db[d][(w.whi[d]-lo)<<9:], role)
			}
			continue
		}
		w.ol.add(m, false, base+int64(lo)<<9, w.db[d], role)
	}
	w.pb = w.alloc(size)
	if sp.r6 {
		w.qb = w.alloc(size)
	}
	if plan == planRebuild {
		if av.pOK {
			mp := a.roles[row.P]
			w.ol.add(mp, false, sp.off(mp)+int64(ms)<<9, w.pb, row.P)
		}
		if av.qOK {
			mq := a.roles[row.Q]
			w.ol.add(mq, false, sp.off(mq)+int64(ms)<<9, w.qb, row.Q)
		}
	}
	a.stats.readsForWrite.add(row.Stripe, uint64(len(w.ol.ops)))
	if err := sp.runReads(w, row.Stripe); err != nil {
		return err
	}
	if plan == planRebuild {
		if err := sp.rebuild(w, lo, n); err != nil {
			return err
		}
	}
	for d := range row.Data {
		if w.whi[d] > w.wlo[d] && !(plan == planRCW && w.wlo[d] == lo && w.whi[d] == hi) {
			copy(w.db[d][(w.wlo[d]-lo)<<9:], w.newData(p, rel, c, d))
		}
	}
	sp.computeParity(w)
	return nil
}

// partialWrites writes the new data, the parity, and the rebuilt blocks
// of members that failed to read; degraded: a write went to a member
// that is not in sync or failed.
func (sp *stripedPers) partialWrites(w *stripeWork, p []byte, rel, lo, hi uint64, plan int, fua bool) (degraded bool, err error) {
	a := sp.a
	c := sp.chunk()
	row := &w.row
	n := hi - lo
	ms := row.Sector + lo
	for d, role := range row.Data {
		m := a.roles[role]
		if !m.writable() {
			continue
		}
		if w.bad[role] && plan == planRebuild {
			w.ol.add(m, true, sp.off(m)+int64(ms)<<9, w.db[d], role).fua = fua
			continue
		}
		if w.whi[d] == w.wlo[d] {
			continue
		}
		if m.State() != InSync && !m.readable(ms, n) {
			degraded = true
		}
		w.ol.add(m, true, sp.off(m)+int64(row.Sector+w.wlo[d])<<9, w.newData(p, rel, c, d), role).fua = fua
	}
	if plan != planDataOnly {
		for _, pr := range [2]struct {
			role int
			b    []byte
		}{{row.P, w.pb}, {row.Q, w.qb}} {
			if pr.role < 0 {
				continue
			}
			m := a.roles[pr.role]
			if !m.writable() {
				continue
			}
			w.ol.add(m, true, sp.off(m)+int64(ms)<<9, pr.b, pr.role).fua = fua
		}
	}
	var u *ioUnit
	if a.jnl != nil && plan != planDataOnly {
		// md logs no stripe without parity to write (r5l_write_stripe)
		if u, err = sp.logPartial(w, p, rel, lo, hi); err != nil {
			w.ol.ops = w.ol.ops[:0]
			return degraded, err
		}
	}
	a.run(w.ol.ops)
	if u != nil {
		a.jnl.applied(u)
	}
	for i := range w.ol.ops {
		op := &w.ol.ops[i]
		if op.err != nil {
			a.stats.writeErrors.add(row.Stripe, 1)
			degraded = true
			if !a.failMember(op.m, op.err) {
				err = op.err
			}
		} else if w.bad[op.tag] {
			op.m.corrected.Add(1)
			a.stats.correctedReads.add(row.Stripe, 1)
		}
	}
	w.ol.ops = w.ol.ops[:0]
	if err == nil && a.failed.Load() {
		err = ErrFailed
	}
	return degraded, err
}

func (a *Array) maxDegradedStriped() int {
	if a.level == layout.RAID6 {
		return 2
	}
	return 1
}

// ---------------------------------------------------------------- zeroes

func (sp *stripedPers) zero(sector, count uint64, full, discard bool) error {
	a := sp.a
	if full {
		if discard {
			// md discards raid4/5/6 stripes only when the members
			// guarantee zeroes after a discard (devices_handle_discard_safely).
			for _, m := range a.roles {
				if m != nil && !m.dev.Geometry().DiscardZeroes {
					return nil
				}
			}
		}
		return sp.writeFull(nil, sector, int(count/sp.g.StripeSectors()), false, func(m *member, off, n int64) error {
			if discard {
				return m.dev.Discard(off, n)
			}
			return writeZeroes(m.dev, off, n)
		})
	}
	if discard {
		return nil // partial stripes are not discarded
	}
	b := getZeroBuf(int(count) << 9)
	defer putBuf(b)
	return sp.writePartial(b.b, sector, false)
}

// lockStripe locks chunk sectors [lo, hi) of stripe.
func (a *Array) lockStripe(stripe, lo, hi uint64)   { a.locks.lock(stripe, lo, hi) }
func (a *Array) unlockStripe(stripe, lo, hi uint64) { a.locks.unlock(stripe, lo, hi) }
