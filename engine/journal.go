package engine

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"mdtool/engine/layout"
	"mdtool/engine/r5log"
	"mdtool/superblock"
)

// The raid4/5/6 write journal (md's r5l log, raid5-cache.c), in md's
// default write-through mode: every stripe write first goes to the
// journal device as an io_unit (a meta block listing the data pages, by
// array sector, and the stripe's parity, followed by those pages), is
// made durable there, and only then goes to the members. A crash in
// between leaves the io_unit in the log, and the next start (md's or
// the engine's) writes it to the members again: no write hole, and no
// resync after an unclean stop (md records resync_offset MaxSector
// while the array is active: MD_JOURNAL_CLEAN).
//
// The ring is the journal member's data area; journal_tail (in its
// superblock) is the last checkpoint: everything before it is on the
// members. A checkpoint flushes the members and moves the tail to the
// first io_unit whose member writes have not ended (or to the newest
// io_unit when all have), as r5l_do_reclaim does, and rewrites the
// superblocks (md_update_sb through MD_SB_CHANGE_DEVS: an event).

// ErrJournal: the write journal failed; the array takes no more writes.
var ErrJournal = errors.New("engine: write journal failed")

// ErrJournaled: md refuses a reshape, a size change, a level change and a
// bitmap on an array with a write journal (EINVAL).
var ErrJournaled = fmt.Errorf("%w: the array has a write journal", ErrUnsupported)

// journaled reports whether the array has a write journal (present or
// missing).
func (a *Array) journaled() bool {
	return a.jm != nil || a.journalFeature
}

// journal is the running write journal.
type journal struct {
	a    *Array
	m    *member
	seed uint32
	off  int64  // byte offset of the ring on the journal device
	size uint64 // ring size in sectors (a multiple of 8)

	mu   sync.Mutex
	cond *sync.Cond
	head uint64 // where the next io_unit goes (sectors)
	seq  uint64 // the next io_unit's sequence number
	tail uint64 // journal_tail: the last checkpoint
	// units are the io_units after the tail, oldest first.
	units []*ioUnit
	// written: every io_unit below this seq is written (not yet
	// durable); durable: every io_unit below this seq is durable.
	written, durable uint64
	flushing         bool
	reclaiming       bool
	failed           error
	// subMu: a write that is not whole 4 KiB pages reads, merges and
	// writes whole pages (journal pages are whole pages), holding it
	// exclusively; whole-page writes hold it shared, so that none lands
	// between such a read and its write (md's stripe cache merges them
	// under the stripe's lock).
	subMu sync.RWMutex
	// mode is the JournalMode and c the write-back cache (journal_wb.go);
	// writingOut: the cache is being written out (subMu held
	// exclusively).
	mode       atomic.Int32
	c          wbCache
	writingOut atomic.Bool
}

// ioUnit is one request's share of the log: meta blocks and pages.
type ioUnit struct {
	seq     uint64 // first sequence number
	n       uint64 // meta blocks (sequence numbers)
	start   uint64 // ring position (sectors)
	sectors uint64
	written bool
	applied bool // the member writes have ended
	// A write-back io_unit (wb: its data pages cached, logged without
	// parity) is done (applied) when no cached page is its (cached) and
	// no newer io_unit that superseded one is still to be made durable
	// (pending); release lists the io_units this one superseded pages of.
	wb              bool
	cached, pending int
	release         []*ioUnit
}

const pageSectors = 8

// openJournal is raid5_run's and r5l_init's part: a journaled array
// without its journal runs read-only (md: "journal disk is missing,
// force array readonly"); with it, the journal is set up (recovered by
// recoverJournal once the personality runs).
func (a *Array) openJournal(ref *superblock.Superblock) error {
	if ref.FeatureMap&superblock.FeatureJournal == 0 {
		return nil
	}
	a.journalFeature = true
	if a.jm == nil {
		if !a.opts.ReadOnly {
			a.opts.Logf("md/raid:%s: journal disk is missing, force array readonly", a.opts.Name)
			a.opts.ReadOnly = true
		}
		return nil
	}
	if a.opts.ReadOnly {
		return nil
	}
	m := a.jm
	if m.ls.sb.DataSize < 4*pageSectors {
		return fmt.Errorf("%w: the journal device has no room for a log", ErrInvalidSuper)
	}
	j := &journal{a: a, m: m, seed: r5log.Seed(ref.SetUUID), off: m.dataOff,
		size: m.ls.sb.DataSize &^ (pageSectors - 1)} // log->device_size
	j.cond = sync.NewCond(&j.mu)
	a.jnl = j
	a.meta.journalClean = ref.ResyncOffset == superblock.MaxSector
	a.meta.journalTail = m.ls.sb.RecoveryOffset
	return nil
}

func (j *journal) ringAdd(pos, n uint64) uint64 { return r5log.RingAdd(j.size, pos, n) }

// used is the ring space between the tail and the head.
func (j *journal) used() uint64 { return r5log.RingDistance(j.size, j.tail, j.head) }

// readLog reads the ring at byte offset off (wrapping).
func (j *journal) readLog(p []byte, off int64) error {
	ring := int64(j.size) * 512
	for len(p) > 0 {
		off %= ring
		n := min(int64(len(p)), ring-off)
		if err := readFull(j.m.dev, p[:n], j.off+off); err != nil {
			return err
		}
		p, off = p[n:], off+n
	}
	return nil
}

// writeLog writes p at ring position pos (sectors), wrapping.
func (j *journal) writeLog(p []byte, pos uint64) error {
	ring := int64(j.size) * 512
	off := int64(pos) * 512
	for len(p) > 0 {
		off %= ring
		n := min(int64(len(p)), ring-off)
		if _, err := j.m.dev.WriteAt(p[:n], j.off+off); err != nil {
			return err
		}
		p, off = p[n:], off+n
	}
	return nil
}

type ringReader struct{ j *journal }

func (r ringReader) ReadAt(p []byte, off int64) (int, error) {
	if err := r.j.readLog(p, off); err != nil {
		return 0, err
	}
	return len(p), nil
}

// recoverJournal is r5l_recovery_log: the io_units after the tail are
// written to the members again (data and parity as logged; a stripe
// logged without parity, from md's write-back mode, through the write
// path, which computes its parity), and the log starts over after them
// with md's jump of the sequence number, at a new tail.
func (a *Array) recoverJournal() error {
	j := a.jnl
	if j == nil {
		return nil
	}
	g := a.striped
	plan, err := r5log.Scan(ringReader{j}, r5log.Params{DevSectors: j.m.ls.sb.DataSize, Tail: a.meta.journalTail,
		Seed: j.seed, MaxDegraded: a.maxDegradedStriped(), Map: func(s uint64) (uint64, int) {
			l := g.Locate(s)
			return l.Sector, l.Role
		}})
	if err != nil {
		return fmt.Errorf("journal recovery: %w", err)
	}
	if msg := plan.Message(a.opts.Name); msg != "" {
		a.opts.Logf("%s", msg)
	}
	page := make([]byte, pageSectors*512)
	var row layout.Row
	for _, st := range plan.Replay {
		g.Row(st.Sector/g.ChunkSectors(), &row)
		put := func(role int, at int64) error {
			if at < 0 || role < 0 {
				return nil
			}
			m := a.roles[role]
			if !m.writable() {
				return nil
			}
			if err := j.readLog(page, at); err != nil {
				return err
			}
			if _, err := m.dev.WriteAt(page, m.dataOff+int64(st.Sector)*512); err != nil {
				a.failMember(m, err)
			}
			return nil
		}
		for _, pg := range st.Data {
			if err := put(pg.Dev, pg.Off); err != nil {
				return fmt.Errorf("journal recovery: %w", err)
			}
		}
		if err := put(row.P, st.P); err != nil {
			return fmt.Errorf("journal recovery: %w", err)
		}
		if err := put(row.Q, st.Q); err != nil {
			return fmt.Errorf("journal recovery: %w", err)
		}
	}
	if len(plan.Replay) > 0 {
		if err := a.flushMembers(); err != nil {
			return err
		}
	}
	// The new log: an empty meta block at the end of the old one, with
	// md's sequence jump, so that nothing of the old log reads as its
	// continuation.
	start, seq := plan.End, plan.NextSeq
	j.tail = plan.Start
	if plan.Fresh {
		// r5l_load_log's create_new_log: an empty meta block at 0 with a
		// random sequence number, the tail there
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		start, seq, j.tail = 0, uint64(binary.LittleEndian.Uint32(b[:])), 0
	}
	if err := j.writeLog(r5log.EmptyMeta(j.seed, seq, start), start); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := j.m.dev.Flush(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.units = []*ioUnit{{seq: seq, n: 1, start: start, sectors: pageSectors, written: true, applied: true}}
	j.head, j.seq = j.ringAdd(start, pageSectors), seq+1
	j.written, j.durable = j.seq, j.seq
	// Data-only stripes (md's write-back mode kept the data in the log
	// alone): through the write path, journaled after the new start,
	// while the old tail still protects them.
	for _, st := range plan.DataOnly {
		for _, pg := range st.Data {
			if err := j.readLog(page, pg.Off); err != nil {
				return fmt.Errorf("journal recovery: %w", err)
			}
			s, ok := g.Unmap(pg.Dev, st.Sector)
			if !ok {
				continue
			}
			if err := a.pers.write(page, s, false, false); err != nil {
				return fmt.Errorf("journal recovery: %w", err)
			}
		}
	}
	if len(plan.DataOnly) > 0 {
		if err := a.flushMembers(); err != nil {
			return err
		}
		return j.checkpoint()
	}
	// r5l_write_super: the new tail goes into the superblocks with the
	// next md_update_sb. When the array was just created (members at 0
	// events), md has its first update pending anyway (the new disks)
	// and the tail goes with it; otherwise that update is this one (an
	// event more than a journal-less assembly).
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	a.meta.journalTail = start
	j.tail = start
	j.units = j.units[:1]
	if a.newArray() {
		a.meta.changeDevs = true
		return nil
	}
	return a.updateSuperLocked(true)
}

// newArray reports whether no active member was ever started (mdadm
// --create writes 0 events).
func (a *Array) newArray() bool {
	for _, m := range a.roles {
		if m != nil && m.sbEvents != 0 {
			return false
		}
	}
	return true
}

// checkpoint moves the tail as far as the member writes allow (they are
// flushed first) and records it in the superblocks.
func (j *journal) checkpoint() error {
	j.mu.Lock()
	cp, drop := j.checkpointPos()
	j.mu.Unlock()
	a := j.a
	if err := a.flushMembers(); err != nil {
		return err
	}
	a.meta.mu.Lock()
	a.meta.journalTail = cp
	err := a.updateSuperLocked(true) // r5l_write_super: MD_SB_CHANGE_DEVS
	a.meta.mu.Unlock()
	if err != nil {
		return err
	}
	j.mu.Lock()
	j.tail = cp
	j.units = j.units[drop:]
	j.cond.Broadcast()
	j.mu.Unlock()
	return nil
}

// checkpointPos is where a checkpoint may put the tail: the start of the
// newest io_unit whose member writes, and those of every io_unit before
// it, have ended (r5l_complete_finished_ios' next_checkpoint): a written
// meta block, replayed harmlessly; drop is how many io_units lie before
// it.
func (j *journal) checkpointPos() (cp uint64, drop int) {
	cp, drop = j.tail, 0
	for i, u := range j.units {
		if !u.applied {
			break
		}
		cp, drop = u.start, i
	}
	return cp, drop
}

// tailTarget is checkpointPos under j.mu, and whether the tail would
// move there.
func (j *journal) tailTarget() (cp uint64, drop int, moved bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	cp, drop = j.checkpointPos()
	return cp, drop, cp != j.tail
}

// reserve takes room for an io_unit of the given sectors and sequence
// numbers, waiting for (or running) a checkpoint when the ring is full,
// and keeping headroom sectors more free. insert, when not nil, runs
// with the io_unit numbered and before it is taken (in log order); its
// error is returned. A cached write (insert) gets errNeedFlush when only
// writing the cache out frees the log.
func (j *journal) reserve(sectors, metas, headroom uint64, insert func(*ioUnit) error) (*ioUnit, error) {
	if sectors+pageSectors > j.size {
		return nil, fmt.Errorf("%w: an io_unit of %d sectors in a log of %d", ErrJournal, sectors, j.size)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for {
		if err := j.err(); err != nil {
			return nil, err
		}
		// r5l_has_free_space: the ring never fills up completely.
		if j.used()+sectors+headroom < j.size {
			break
		}
		if j.reclaiming {
			j.cond.Wait()
			continue
		}
		if _, drop := j.checkpointPos(); drop == 0 {
			if j.blockedByCache() {
				if insert != nil {
					return nil, errNeedFlush
				}
				// Writing the cache out found the log full: the
				// headroom kept for it was not enough.
				return nil, fmt.Errorf("%w: the log is full while writing the write-back cache out", ErrJournal)
			}
			j.cond.Wait() // the oldest io_unit's member writes still run
			continue
		}
		j.reclaiming = true
		j.mu.Unlock()
		err := j.checkpoint()
		j.mu.Lock()
		j.reclaiming = false
		j.cond.Broadcast()
		if err != nil {
			j.failed = fmt.Errorf("%w: checkpoint: %v", ErrJournal, err)
			return nil, j.failed
		}
	}
	u := &ioUnit{seq: j.seq, n: metas, start: j.head, sectors: sectors}
	if insert != nil {
		if err := insert(u); err != nil {
			return nil, err
		}
	}
	j.seq += metas
	j.head = j.ringAdd(j.head, sectors)
	j.units = append(j.units, u)
	return u, nil
}

// commit marks u written and returns once it and every io_unit before it
// are durable (r5l_log_run_stripes runs the stripes of io_units in log
// order only). One flush of the journal device covers every io_unit
// written when it starts.
func (j *journal) commit(u *ioUnit, werr error) error {
	err, cause := j.commitLocked(u, werr)
	if cause != nil {
		// r5l_log_endio, r5l_log_flush_endio: md_error on the journal
		// device (faulty in the superblocks; writes fail from now on,
		// cached data still goes to the members)
		j.a.failMember(j.m, cause)
	}
	return err
}

// err is the journal's failure: an I/O error of its own or its device
// marked faulty (j.mu held).
func (j *journal) err() error {
	if j.failed == nil && j.m.State() == Faulty {
		j.failed = fmt.Errorf("%w: the journal device is faulty", ErrJournal)
	}
	return j.failed
}

// commitLocked is commit under j.mu; cause is the I/O error that made
// the journal fail in this call.
func (j *journal) commitLocked(u *ioUnit, werr error) (err, cause error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if werr != nil && j.failed == nil {
		j.failed = fmt.Errorf("%w: %v", ErrJournal, werr)
		cause = werr
	}
	u.written = true
	for _, x := range j.units {
		if x.seq < j.written {
			continue
		}
		if !x.written {
			break
		}
		j.written = x.seq + x.n
	}
	j.cond.Broadcast()
	last := u.seq + u.n
	for j.durable < last {
		if err := j.err(); err != nil {
			return err, cause
		}
		if j.flushing || j.written < last {
			j.cond.Wait()
			continue
		}
		target := j.written
		j.flushing = true
		j.mu.Unlock()
		err := j.m.dev.Flush()
		j.mu.Lock()
		j.flushing = false
		if err != nil {
			if j.failed == nil {
				j.failed = fmt.Errorf("%w: %v", ErrJournal, err)
				cause = err
			}
		} else {
			j.durable = max(j.durable, target)
		}
		j.cond.Broadcast()
	}
	return j.err(), cause
}

// applied marks u's member writes ended: a checkpoint may pass it.
func (j *journal) applied(u *ioUnit) {
	if u == nil {
		return // not logged (written out with the journal failed)
	}
	j.mu.Lock()
	u.applied = true
	j.cond.Broadcast()
	j.mu.Unlock()
}

// close is r5l_quiesce before a stop: every io_unit is on the members
// (flushed by the stop), so the tail moves to the newest one; like
// r5l_write_super it only marks the superblocks changed, and the stop's
// own update records it (an event, or none more when the array is
// dirty and goes clean in that update).
func (j *journal) close() error {
	// raid5_quiesce: the write-back cache is written out first.
	if err := j.flushCacheLocked(); err != nil {
		return err
	}
	cp, drop, moved := j.tailTarget()
	if !moved {
		return nil
	}
	a := j.a
	if err := a.flushMembers(); err != nil {
		return err
	}
	a.meta.mu.Lock()
	a.meta.journalTail = cp
	a.meta.changeDevs = true
	a.meta.mu.Unlock()
	j.mu.Lock()
	j.tail = cp
	j.units = j.units[drop:]
	j.mu.Unlock()
	return nil
}

// logStripes writes the stripes (4 KiB columns) to the log as io_units
// laid out as md lays them out, and makes them durable. The caller
// writes the members next and then calls applied.
func (j *journal) logStripes(cols []r5log.StripeWrite) (*ioUnit, error) {
	if j.writingOut.Load() {
		j.mu.Lock()
		err := j.err()
		j.mu.Unlock()
		if err != nil {
			// handle_stripe with log_failed: cached (injournal) data
			// still goes to the members, unlogged
			return nil, nil
		}
	}
	metas, sectors := r5log.IOSize(cols)
	u, err := j.reserve(sectors, metas, 0, nil)
	if err != nil {
		return nil, err
	}
	if err := j.writeIO(u, cols, sectors, metas); err != nil {
		return nil, err
	}
	return u, nil
}

// writeIO lays the stripes out in u's room, writes them and returns once
// they are durable (commit).
func (j *journal) writeIO(u *ioUnit, cols []r5log.StripeWrite, sectors, metas uint64) error {
	ios, err := r5log.BuildIO(j.seed, u.seq, u.start, j.size, cols)
	if err == nil && (uint64(len(ios)) != metas || ios[len(ios)-1].End != j.ringAdd(u.start, sectors)) {
		err = fmt.Errorf("io_units laid out as %d meta blocks, %d reserved", len(ios), metas)
	}
	if err != nil {
		return j.commit(u, err)
	}
	b := getBuf(int(sectors * 512))
	defer putBuf(b)
	buf := b.b[:sectors*512]
	at := 0
	for _, io := range ios {
		at += copy(buf[at:], io.Meta)
		for _, pg := range io.Pages {
			at += copy(buf[at:], pg.Page)
		}
	}
	return j.commit(u, j.writeLog(buf, u.start))
}

// cols returns w's stripe list with room for n stripes of k data pages.
func (w *stripeWork) cols(n, k int) []r5log.StripeWrite {
	if cap(w.jc) < n {
		w.jc = make([]r5log.StripeWrite, n)
	}
	w.jc = w.jc[:n]
	for i := range w.jc {
		c := &w.jc[i]
		if cap(c.Data) < k {
			c.Data = make([]r5log.DataPage, 0, k)
		}
		c.Data, c.P, c.Q = c.Data[:0], nil, nil
	}
	return w.jc
}

// logFull logs K whole stripes starting at stripe s0: every 4 KiB column
// with all its data pages (in member order, as md walks them) and its
// parity.
func (sp *stripedPers) logFull(w *stripeWork, p, pAll, qAll []byte, s0 uint64, K int) (*ioUnit, error) {
	g, c := sp.g, sp.chunk()
	k, n := g.DataDisks(), g.RaidDisks()
	per := int(c / pageSectors)
	cb := int(c) << 9
	cols := w.cols(K*per, k)
	const pb = pageSectors << 9
	for i := 0; i < K; i++ {
		g.Row(s0+uint64(i), &w.row)
		base := i * int(g.StripeSectors()<<9)
		for col := 0; col < per; col++ {
			jc := &cols[i*per+col]
			o := col * pb
			jc.Sector = w.row.Sector + uint64(col*pageSectors)
			for role := 0; role < n; role++ {
				d := dataIndexOf(&w.row, role)
				if d < 0 {
					continue
				}
				jc.Data = append(jc.Data, r5log.DataPage{
					Location: ((s0+uint64(i))*uint64(k)+uint64(d))*c + uint64(col*pageSectors),
					Page:     p[base+d*cb+o : base+d*cb+o+pb]})
			}
			jc.P = pAll[i*cb+o : i*cb+o+pb]
			if sp.r6 {
				jc.Q = qAll[i*cb+o : i*cb+o+pb]
			}
		}
	}
	return sp.a.jnl.logStripes(cols)
}

// dataIndexOf is the data index of role in row (-1: a parity role).
func dataIndexOf(row *layout.Row, role int) int {
	for d, r := range row.Data {
		if r == role {
			return d
		}
	}
	return -1
}

// logPartial logs the columns [lo, hi) (chunk sectors) of a partial
// stripe write: the written data pages and the new parity. A write-out
// of the write-back cache logs the parity alone: its data pages are in
// the journal already (md's R5_InJournal pages are not logged again), and
// recovery takes them from there.
func (sp *stripedPers) logPartial(w *stripeWork, p []byte, rel, lo, hi uint64) (*ioUnit, error) {
	g, c := sp.g, sp.chunk()
	k, n := g.DataDisks(), g.RaidDisks()
	row := &w.row
	cols := w.cols(int((hi-lo)/pageSectors), k)
	const pb = pageSectors << 9
	inJournal := sp.a.jnl.writingOut.Load()
	for i := range cols {
		o := lo + uint64(i*pageSectors)
		jc := &cols[i]
		jc.Sector = row.Sector + o
		for role := 0; role < n && !inJournal; role++ {
			d := dataIndexOf(row, role)
			if d < 0 || o < w.wlo[d] || o >= w.whi[d] {
				continue
			}
			nd := w.newData(p, rel, c, d)
			at := (o - w.wlo[d]) << 9
			jc.Data = append(jc.Data, r5log.DataPage{Location: (row.Stripe*uint64(k)+uint64(d))*c + o, Page: nd[at : at+pb]})
		}
		at := (o - lo) << 9
		jc.P = w.pb[at : at+pb]
		if sp.r6 {
			jc.Q = w.qb[at : at+pb]
		}
	}
	return sp.a.jnl.logStripes(cols)
}

// subPageWrite writes p at off when either is not whole 4 KiB pages: the
// pages it touches are read, merged and written whole (journal pages are
// whole pages; md's stripe cache works on pages too). Such writes are
// serialised: two of them in one page must not lose each other's bytes.
func (j *journal) subPageWrite(p []byte, off int64, fua bool) (int, error) {
	const pg = pageSectors << 9
	a := j.a
	lo := off &^ (pg - 1)
	hi := (off + int64(len(p)) + pg - 1) &^ (pg - 1)
	hi = min(hi, a.size)
	j.subMu.Lock()
	defer j.subMu.Unlock()
	b := getBuf(int(hi - lo))
	defer putBuf(b)
	buf := b.b[:hi-lo]
	read := func(at int64) error {
		n := min(pg, hi-at)
		return j.read(buf[at-lo:at-lo+n], at, func() error {
			return a.pieces(at, n, func(o, n int64, full bool) error {
				return a.pers.read(buf[o-lo:o-lo+n], uint64(o>>9))
			})
		})
	}
	if off != lo {
		if err := read(lo); err != nil {
			return 0, err
		}
	}
	if end := off + int64(len(p)); end != hi && (hi-pg >= off || off == lo) {
		if err := read(hi - pg); err != nil {
			return 0, err
		}
	}
	copy(buf[off-lo:], p)
	if _, err := j.write(buf, lo, fua, true); err != nil {
		return 0, err
	}
	return len(p), nil
}

// zero writes zeroes over [off, off+n) through the journal (a discard is
// not logged by md, and a member discard would bypass the log: md raid5
// with a journal discards nothing; a discard here is a no-op).
func (j *journal) zero(off, n int64, discard bool) error {
	if discard {
		return nil
	}
	const step = 1 << 20
	b := getBuf(step)
	defer putBuf(b)
	z := b.b[:step]
	clear(z)
	for n > 0 {
		l := min(n, step)
		var err error
		if (off|l)&(pageSectors<<9-1) != 0 {
			_, err = j.subPageWrite(z[:l], off, false)
		} else {
			_, err = j.write(z[:l], off, false, false)
		}
		if err != nil {
			return err
		}
		off, n = off+l, n-l
	}
	return nil
}
