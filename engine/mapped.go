package engine

import (
	"fmt"
	"sync"
	"time"

	"mdtool/engine/layout"
)

// mappedPers serves the levels without parity: linear, raid0, raid1 and
// raid10. Every array sector has one (linear, raid0) or several (raid1,
// raid10) copies; reads use one readable copy, writes go to every
// writable copy.
type mappedPers struct {
	a *Array
}

var locsPool = sync.Pool{New: func() any { s := make([]layout.Loc, 0, 8); return &s }}

// lockRegions locks [s, s+n) of raid1/raid10 in lockSec regions,
// ascending (so two requests never wait on each other in a cycle).
func (a *Array) lockRegions(s, n uint64) {
	if a.lockSec == 0 {
		return
	}
	for end := s + n; s < end; {
		key := s / a.lockSec
		lo := s - key*a.lockSec
		hi := min(end-key*a.lockSec, a.lockSec)
		a.locks.lock(key, lo, hi)
		s = key*a.lockSec + hi
	}
}

func (a *Array) unlockRegions(s, n uint64) {
	if a.lockSec == 0 {
		return
	}
	for end := s + n; s < end; {
		key := s / a.lockSec
		lo := s - key*a.lockSec
		hi := min(end-key*a.lockSec, a.lockSec)
		a.locks.unlock(key, lo, hi)
		s = key*a.lockSec + hi
	}
}

// pickCopy chooses the copy to read [sector of l, +n) from: a readable
// member, not write-mostly if possible, with the least expected wait: the
// reads in flight plus this one, times the member's recent latency in
// microseconds plus one (a member that reports no latency, a local disk,
// counts 1: so local copies go before remote ones, and remote ones are
// weighed by how fast their server answers).
func (a *Array) pickCopy(locs []layout.Loc, n uint64, skip *member) int {
	best := -1
	var bestCost int64
	bestWM := true
	for i, l := range locs {
		m := a.roles[l.Role]
		if m == skip || !m.readable(l.Sector, n) {
			continue
		}
		cost := m.pending.Load() + 1
		if m.lat != nil {
			cost *= m.lat.Latency().Microseconds() + 1
		}
		if best < 0 || (bestWM && !m.writeMostly) || (bestWM == m.writeMostly && cost < bestCost) {
			best, bestCost, bestWM = i, cost, m.writeMostly
		}
	}
	return best
}

// LatencyReporter is implemented by devices that know their recent
// latency (members on NBD servers); raid1 and raid10 reads prefer the
// copy with the least expected wait (pickCopy).
type LatencyReporter interface {
	Latency() time.Duration
}

// latencyOf is dev's LatencyReporter, or nil.
func latencyOf(dev Device) LatencyReporter {
	lr, _ := dev.(LatencyReporter)
	return lr
}

func (mp *mappedPers) read(p []byte, sector uint64) error {
	a := mp.a
	lp := locsPool.Get().(*[]layout.Loc)
	defer locsPool.Put(lp)
	ol := getOps()
	defer putOps(ol)
	multi := a.geo.MaxCopies() > 1
	s := sector
	rem := uint64(len(p) >> 9)
	pos := 0
	for rem > 0 {
		var run uint64
		*lp, run = a.geo.Map(s, *lp)
		n := min(run, rem)
		i := a.pickCopy(*lp, n, nil)
		if i < 0 {
			return fmt.Errorf("%w: no readable copy of sector %d", ErrFailed, s)
		}
		l := (*lp)[i]
		m := a.roles[l.Role]
		off := m.dataOff + int64(l.Sector)*512
		b := p[pos : pos+int(n)*512]
		if k := len(ol.ops); k > 0 {
			prev := &ol.ops[k-1]
			if prev.m == m && prev.off+int64(prev.bytes()) == off && len(prev.bufs) == 1 &&
				addrOf(prev.bufs[0])+uintptr(len(prev.bufs[0])) == addrOf(b) {
				prev.one[0] = prev.one[0][:len(prev.one[0])+len(b)]
				prev.bufs = prev.one[:]
				goto next
			}
		}
		ol.add(m, false, off, b, int(s-sector))
	next:
		s += n
		rem -= n
		pos += int(n) * 512
	}
	if multi {
		for i := range ol.ops {
			ol.ops[i].m.pending.Add(1)
		}
	}
	a.run(ol.ops)
	if multi {
		for i := range ol.ops {
			ol.ops[i].m.pending.Add(-1)
		}
	}
	for i := range ol.ops {
		op := &ol.ops[i]
		if op.err == nil {
			continue
		}
		a.stats.readErrors.add(uint64(op.off), 1)
		if !multi {
			return op.err // raid0/linear: md passes the error up
		}
		start := sector + uint64(op.tag)
		bad := op.m
		if bad.State() == Faulty || a.level == layout.RAID10 && a.exceedReadErrors(bad) {
			// failed: the range comes from the other copies
			if err := mp.fixRead(op.bufs[0], start, bad, op.err); err != nil {
				return err
			}
			continue
		}
		err := retryPages(op, start, func(b []byte, s uint64, err error) error {
			return mp.fixRead(b, s, bad, err)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// exceedReadErrors is the start of raid10's fix_read_error: the member's
// read-error count decays (check_decay_read_errors: halved for every
// hour since the previous error, cleared after 32) and counts this one;
// past MaxCorrectedReadErrors the member fails. It reports whether m is
// faulty (now or already).
func (a *Array) exceedReadErrors(m *member) bool {
	if m.State() == Faulty {
		return true
	}
	max := a.opts.MaxCorrectedReadErrors
	if max < 0 {
		return false
	}
	now := a.opts.Clock().Unix()
	m.readErrMu.Lock()
	if hours := (now - m.lastReadErr) / 3600; hours >= 32 || hours < 0 {
		m.readErrs = 0
	} else {
		m.readErrs >>= uint(hours)
	}
	m.lastReadErr = now
	m.readErrs++
	n := m.readErrs
	m.readErrMu.Unlock()
	if n <= max {
		return false
	}
	p := mdPrefix(a.level, a.mdName())
	a.opts.Logf("%s: %s: Raid device exceeded read_error threshold [cur %d:max %d]", p, a.devName(m), n, max)
	a.opts.Logf("%s: %s: Failing raid device", p, a.devName(m))
	a.failMember(m, fmt.Errorf("%d read errors corrected, more than max_read_errors %d", n-1, max))
	return m.State() == Faulty
}

// fixRead is raid1/raid10 read-error handling (fix_read_error): read the
// range from another copy, rewrite it onto the member that failed, and
// check that it reads back; a member whose rewrite fails becomes faulty.
func (mp *mappedPers) fixRead(p []byte, sector uint64, bad *member, cause error) error {
	a := mp.a
	pfx := mdPrefix(a.level, a.mdName())
	lp := locsPool.Get().(*[]layout.Loc)
	defer locsPool.Put(lp)
	n := uint64(len(p) >> 9)
	if !a.opts.ReadOnly {
		a.lockRegions(sector, n)
		defer a.unlockRegions(sector, n)
	}
	for s, pos := sector, 0; s < sector+n; {
		var run uint64
		*lp, run = a.geo.Map(s, *lp)
		c := min(run, sector+n-s)
		b := p[pos : pos+int(c)*512]
		var badLoc *layout.Loc
		for j := range *lp {
			if a.roles[(*lp)[j].Role] == bad {
				badLoc = &(*lp)[j]
			}
		}
		got := false
		for tries := 0; tries < len(*lp) && !got; tries++ {
			i := a.pickCopy(*lp, c, bad)
			if i < 0 {
				break
			}
			l := (*lp)[i]
			m := a.roles[l.Role]
			if _, err := m.dev.ReadAt(b, m.dataOff+int64(l.Sector)*512); err != nil {
				a.failMember(m, err)
				continue
			}
			got = true
			// handle_read_error / raid10_read_request: the read goes to
			// another copy.
			if a.level == layout.RAID10 {
				a.opts.Logf("%s: %s: redirecting sector %d to another mirror", pfx, a.devName(m), s)
			} else {
				a.opts.Logf("%s: redirecting sector %d to other mirror: %s", pfx, s, a.devName(m))
			}
		}
		if !got {
			a.opts.Logf("%s: %s: unrecoverable I/O read error for block %d", pfx, a.devName(bad), s)
			return fmt.Errorf("%w: sector %d unreadable on every copy: %v", ErrFailed, s, cause)
		}
		a.stats.degradedReads.add(s, 1)
		if badLoc != nil && !a.opts.ReadOnly && bad.writable() {
			off := bad.dataOff + int64(badLoc.Sector)*512
			chk := getBuf(len(b))
			_, werr := bad.dev.WriteAt(b, off)
			if werr == nil {
				_, werr = bad.dev.ReadAt(chk.b, off)
			}
			putBuf(chk)
			if werr != nil {
				a.failMember(bad, werr)
			} else {
				bad.corrected.Add(1)
				a.stats.correctedReads.add(s, 1)
				a.opts.Logf("%s: read error corrected (%d sectors at %d on %s)", pfx, c, badLoc.Sector+uint64(bad.dataOff>>9), a.devName(bad))
			}
		}
		s += c
		pos += int(c) * 512
	}
	return nil
}

func (mp *mappedPers) write(p []byte, sector uint64, full, fua bool) error {
	a := mp.a
	n := uint64(len(p) >> 9)
	redundant := a.redundant()
	if redundant {
		if err := a.bm.StartWrite(sector, n); err != nil {
			return err
		}
		a.lockRegions(sector, n)
	}
	lp := locsPool.Get().(*[]layout.Loc)
	ol := getOps()
	degraded := false
	s := sector
	pos := 0
	for rem := n; rem > 0; {
		var run uint64
		*lp, run = a.geo.Map(s, *lp)
		c := min(run, rem)
		b := p[pos : pos+int(c)*512]
		for _, l := range *lp {
			m := a.roles[l.Role]
			if !m.writable() {
				degraded = true
				continue
			}
			if m.State() != InSync && !m.readable(l.Sector, c) {
				degraded = true
			}
			op := ol.add(m, true, m.dataOff+int64(l.Sector)*512, b, int(s-sector))
			op.fua = fua
		}
		s += c
		rem -= c
		pos += int(c) * 512
	}
	a.run(ol.ops)
	var err error
	failedCopies := 0
	for i := range ol.ops {
		op := &ol.ops[i]
		if op.err != nil {
			a.stats.writeErrors.add(uint64(op.off), 1)
			degraded = true
			failedCopies++
			if !redundant {
				err = op.err
			} else {
				a.markFaulty(op.m, op.err)
			}
		}
	}
	if failedCopies > 0 && redundant {
		// The failures are in the superblocks before the write completes.
		a.recordFailures()
		// Every run needs one copy written (ops of a run share its tag).
		for i := 0; i < len(ol.ops) && err == nil; {
			j, ok := i, false
			for ; j < len(ol.ops) && ol.ops[j].tag == ol.ops[i].tag; j++ {
				ok = ok || ol.ops[j].err == nil
			}
			if !ok {
				err = ol.ops[i].err
			}
			i = j
		}
		if err == nil && a.failed.Load() {
			err = ErrFailed
		}
	}
	putOps(ol)
	locsPool.Put(lp)
	if redundant {
		a.unlockRegions(sector, n)
		a.bm.EndWrite(sector, n, !degraded && err == nil)
	}
	return err
}

func (mp *mappedPers) zero(sector, count uint64, full, discard bool) error {
	a := mp.a
	redundant := a.redundant()
	if redundant {
		if err := a.bm.StartWrite(sector, count); err != nil {
			return err
		}
		a.lockRegions(sector, count)
	}
	lp := locsPool.Get().(*[]layout.Loc)
	defer locsPool.Put(lp)
	var firstErr error
	degraded := false
	for s, rem := sector, count; rem > 0; {
		var run uint64
		*lp, run = a.geo.Map(s, *lp)
		c := min(run, rem)
		for _, l := range *lp {
			m := a.roles[l.Role]
			if !m.writable() {
				degraded = true
				continue
			}
			off := m.dataOff + int64(l.Sector)*512
			var err error
			if discard {
				err = m.dev.Discard(off, int64(c)*512)
			} else {
				err = writeZeroes(m.dev, off, int64(c)*512)
			}
			switch {
			case err == nil:
			case discard:
				// Discard is advisory: a member that cannot discard
				// keeps its data.
			case !redundant || !a.failMember(m, err):
				if firstErr == nil {
					firstErr = err
				}
			default:
				degraded = true
			}
		}
		s += c
		rem -= c
	}
	if redundant {
		a.unlockRegions(sector, count)
		a.bm.EndWrite(sector, count, !degraded)
	}
	return firstErr
}
