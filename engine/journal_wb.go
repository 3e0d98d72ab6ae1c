package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"mdtool/engine/r5log"
)

// Write-back mode (md's r5c cache, raid5-cache.c). A write completes
// once its data pages are durable in the journal, logged without parity
// (r5c_cache_data); the pages stay cached in memory, reads see them,
// and the members do not. They go to the members later, written out
// as md writes a cached stripe out: every cached page of a 4 KiB column
// together, logged again with the column's new parity, then written to
// the members (r5c_make_stripe_write_out). A journal io_unit whose pages
// are all written out or superseded by newer durable ones is done, and
// the tail may pass it (r5c_finish_stripe_write_out; the checkpoint is
// journal.checkpoint as in write-through).
//
// A crash leaves the cached pages in the log as data-only stripes; the
// next start (md's or the engine's, recoverJournal) writes them out.
//
// Writing out happens with the journal's subMu held exclusively (no
// write runs meanwhile): when the cache holds its limit, when a
// data-only io_unit holds the log's tail and the log is full, when the
// mode goes back to write-through (md suspends the array, which writes
// the cache out), when a member fails (md switches to write-through:
// r5c_update_on_rdev_error), and at the stop (raid5_quiesce).
//
// Room: the cache holds at most limit pages, and cached writes leave
// headroom log sectors free, enough to write the whole cache out (each
// cached page costs at most a meta block, itself and the column's
// parity), so that writing out never waits for itself.

// errNeedFlush: a cached write found the cache or the log full; its
// caller writes the cache out (with subMu held exclusively) and retries.
var errNeedFlush = errors.New("engine: write-back cache full")

const pageBytes = pageSectors << 9

// wbCache is the write-back cache: whole 4 KiB pages by array page.
type wbCache struct {
	mu    sync.RWMutex
	pages map[uint64]*cpage // by array page number (array sector / 8)
	n     atomic.Int64      // len(pages)
	// epoch counts the write-outs that removed pages: a read that saw
	// none between its member reads and its look into the cache is
	// current.
	epoch     atomic.Uint64
	limit     int         // pages
	group     int         // pages per io_unit of a cached write
	headroom  uint64      // log sectors cached writes leave free
	switching atomic.Bool // a switch to write-through is pending (a member failed)
}

// cpage is one cached page and the io_unit that logged its data last.
type cpage struct {
	b []byte
	u *ioUnit
}

var cpagePool = sync.Pool{New: func() any { return make([]byte, pageBytes) }}

func (j *journal) getMode() JournalMode { return JournalMode(j.mode.Load()) }

// setMode is r5c_journal_mode_set after its checks: md suspends the
// array (no write in flight; raid5_quiesce writes the cache out) and sets
// the mode.
func (j *journal) setMode(m JournalMode) error {
	j.subMu.Lock()
	defer j.subMu.Unlock()
	return j.setModeLocked(m)
}

func (j *journal) setModeLocked(m JournalMode) error {
	if m == JournalWriteBack && j.c.pages == nil {
		if err := j.initCache(); err != nil {
			return err
		}
	}
	if m == JournalWriteThrough {
		if err := j.flushCacheLocked(); err != nil {
			return err
		}
	}
	j.mode.Store(int32(m))
	return nil
}

// initCache sizes the cache to the log: a cached page takes a page and
// at most a meta block in the log, and as much again with its parity when
// written out; the cache and its headroom take at most half the log (the
// rest holds io_units that newer writes superseded until a checkpoint).
func (j *journal) initCache() error {
	maxDeg := uint64(j.a.maxDegradedStriped())
	per := (3 + maxDeg) * pageSectors
	half := j.size / 2
	if half <= 64*pageSectors {
		return fmt.Errorf("%w: a journal of %d sectors is too small for write-back", ErrInvalidArgument, j.size)
	}
	l := min((half-64*pageSectors)/per, 16384)
	if l < 16 {
		return fmt.Errorf("%w: a journal of %d sectors is too small for write-back", ErrInvalidArgument, j.size)
	}
	j.c.limit = int(l)
	j.c.group = min(64, int(l)/4)
	j.c.headroom = l*(2+maxDeg)*pageSectors + 16*pageSectors
	j.c.pages = make(map[uint64]*cpage)
	return nil
}

// cached reports whether the cache holds pages.
func (j *journal) cached() bool { return j.c.n.Load() > 0 }

// done marks a write-back io_unit finished when no cached page refers to
// it and no newer io_unit that superseded one of its pages is pending
// (j.mu held).
func (j *journal) wbDone(u *ioUnit) {
	if u.cached == 0 && u.pending == 0 && !u.applied {
		u.applied = true
		j.cond.Broadcast()
	}
}

// blockedByCache reports whether the oldest unfinished io_unit holds
// cached pages: only writing the cache out frees the log then (j.mu held).
func (j *journal) blockedByCache() bool {
	for _, u := range j.units {
		if !u.applied {
			return u.cached > 0
		}
	}
	return false
}

// writeWhole writes whole pages in the current mode; the caller holds
// subMu (shared, or exclusively when excl).
func (j *journal) writeWhole(p []byte, off int64, fua bool) (int, error) {
	if j.getMode() == JournalWriteBack {
		return j.cacheWrite(p, off)
	}
	return j.a.writePieces(p, off, fua)
}

// write is a whole-page write of the array through the journal: with
// subMu held shared (or already exclusively when excl), in the current
// mode; a full cache is written out with subMu held exclusively, and the
// write goes on.
func (j *journal) write(p []byte, off int64, fua, excl bool) (int, error) {
	done := 0
	for {
		if !excl {
			j.subMu.RLock()
		}
		n, err := j.writeWhole(p[done:], off+int64(done), fua)
		if !excl {
			j.subMu.RUnlock()
		}
		done += n
		if errors.Is(err, errNeedFlush) {
			if err := j.flushCache(excl); err != nil {
				return done, err
			}
			continue
		}
		return done, err
	}
}

// flushCache writes the cache out, taking subMu exclusively unless the
// caller holds it so.
func (j *journal) flushCache(excl bool) error {
	if !excl {
		j.subMu.Lock()
		defer j.subMu.Unlock()
	}
	return j.flushCacheLocked()
}

// cacheWrite caches whole pages: logged data-only in io_units of at most
// group pages each, durable, then visible to reads.
func (j *journal) cacheWrite(p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) {
		n := min(len(p)-done, j.c.group*pageBytes)
		if err := j.cacheGroup(p[done:done+n], off+int64(done)); err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

type wbPage struct {
	sector uint64 // member sector of the page (its stripe's sh->sector)
	role   int
	s      uint64 // array sector
	b      []byte
}

func (j *journal) cacheGroup(p []byte, off int64) error {
	g := j.a.striped
	np := len(p) / pageBytes
	pgs := make([]wbPage, np)
	for i := range pgs {
		s := uint64(off>>9) + uint64(i*pageSectors)
		l := g.Locate(s)
		pgs[i] = wbPage{sector: l.Sector, role: l.Role, s: s, b: p[i*pageBytes : (i+1)*pageBytes]}
	}
	// r5l_log_stripe: one stripe per 4 KiB column, its data pages in
	// member order.
	slices.SortFunc(pgs, func(x, y wbPage) int {
		if x.sector != y.sector {
			return cmpU64(x.sector, y.sector)
		}
		return x.role - y.role
	})
	var cols []r5log.StripeWrite
	for i := 0; i < len(pgs); {
		e := i
		sw := r5log.StripeWrite{Sector: pgs[i].sector}
		for ; e < len(pgs) && pgs[e].sector == pgs[i].sector; e++ {
			sw.Data = append(sw.Data, r5log.DataPage{Location: pgs[e].s, Page: pgs[e].b})
		}
		cols = append(cols, sw)
		i = e
	}
	metas, sectors := r5log.IOSize(cols)
	u, err := j.reserve(sectors, metas, j.c.headroom, func(u *ioUnit) error { return j.insert(u, pgs) })
	if err != nil {
		return err
	}
	err = j.writeIO(u, cols, sectors, metas)
	j.mu.Lock()
	for _, x := range u.release {
		x.pending--
		j.wbDone(x)
	}
	u.release = nil
	j.mu.Unlock()
	return err
}

// insert puts the pages of a cached write into the cache as u's, when
// they fit (j.mu held: in log order).
func (j *journal) insert(u *ioUnit, pgs []wbPage) error {
	c := &j.c
	c.mu.Lock()
	defer c.mu.Unlock()
	add := 0
	for i := range pgs {
		if c.pages[pgs[i].s/pageSectors] == nil {
			add++
		}
	}
	if int(c.n.Load())+add > c.limit {
		return errNeedFlush
	}
	u.wb = true
	for i := range pgs {
		k := pgs[i].s / pageSectors
		e := c.pages[k]
		if e == nil {
			e = &cpage{b: cpagePool.Get().([]byte)}
			c.pages[k] = e
			c.n.Add(1)
		} else {
			// superseded: the older io_unit is done once u is durable
			e.u.cached--
			e.u.pending++
			u.release = append(u.release, e.u)
		}
		copy(e.b, pgs[i].b)
		e.u = u
		u.cached++
	}
	return nil
}

// overlay copies the cached pages over p (array bytes at off). It
// reports false when a write-out removed pages since epoch: the member
// reads may predate it, and the read must be done again.
func (j *journal) overlay(p []byte, off int64, epoch uint64) bool {
	c := &j.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.epoch.Load() != epoch {
		return false
	}
	if len(c.pages) == 0 {
		return true
	}
	end := off + int64(len(p))
	for pg := off / pageBytes; pg*pageBytes < end; pg++ {
		e := c.pages[uint64(pg)]
		if e == nil {
			continue
		}
		lo, hi := max(off, pg*pageBytes), min(end, (pg+1)*pageBytes)
		copy(p[lo-off:hi-off], e.b[lo-pg*pageBytes:hi-pg*pageBytes])
	}
	return true
}

// read reads p at off through the personality and the cache.
func (j *journal) read(p []byte, off int64, rd func() error) error {
	for {
		e := j.c.epoch.Load()
		if err := rd(); err != nil {
			return err
		}
		if !j.cached() && j.c.epoch.Load() == e {
			return nil
		}
		if j.overlay(p, off, e) {
			return nil
		}
	}
}

// flushCacheLocked writes every cached page out, stripe row by stripe
// row (subMu held exclusively, or the array closing).
func (j *journal) flushCacheLocked() error {
	c := &j.c
	c.mu.RLock()
	keys := make([]uint64, 0, len(c.pages))
	for k := range c.pages {
		keys = append(keys, k)
	}
	c.mu.RUnlock()
	if len(keys) == 0 {
		return nil
	}
	j.writingOut.Store(true)
	defer j.writingOut.Store(false)
	sp, ok := j.a.pers.(*stripedPers)
	if !ok {
		return fmt.Errorf("%w: write-back cache on %T", ErrJournal, j.a.pers)
	}
	slices.Sort(keys)
	stripeSec := sp.g.StripeSectors()
	b := getBuf(int(stripeSec << 9))
	defer putBuf(b)
	for i := 0; i < len(keys); {
		stripe := keys[i] * pageSectors / stripeSec
		e := i
		for e < len(keys) && keys[e]*pageSectors/stripeSec == stripe {
			e++
		}
		if err := j.flushRow(sp, b.b[:stripeSec<<9], stripe, keys[i:e]); err != nil {
			return err
		}
		i = e
	}
	return nil
}

// flushRow writes the cached pages of one stripe row out: for each run of
// 4 KiB columns with the same cached data indexes, one partial-stripe
// write of exactly those pages (logged with the columns' new parity, as
// write-through logs, then written to the members).
func (j *journal) flushRow(sp *stripedPers, row []byte, stripe uint64, keys []uint64) error {
	c := &j.c
	ch := sp.chunk()
	k := uint64(sp.g.DataDisks())
	stripeSec := sp.g.StripeSectors()
	colPages := ch / pageSectors
	// per column, the data indexes cached (a bit set over k)
	words := (k + 63) / 64
	set := make([]uint64, colPages*words)
	c.mu.RLock()
	for _, key := range keys {
		rel := key*pageSectors - stripe*stripeSec
		d, col := rel/ch, (rel%ch)/pageSectors
		set[col*words+d/64] |= 1 << (d % 64)
		copy(row[rel<<9:(rel+pageSectors)<<9], c.pages[key].b)
	}
	c.mu.RUnlock()
	same := func(x, y uint64) bool {
		return slices.Equal(set[x*words:(x+1)*words], set[y*words:(y+1)*words])
	}
	empty := func(x uint64) bool {
		for _, w := range set[x*words : (x+1)*words] {
			if w != 0 {
				return false
			}
		}
		return true
	}
	for col := uint64(0); col < colPages; {
		if empty(col) {
			col++
			continue
		}
		end := col + 1
		for end < colPages && same(col, end) {
			end++
		}
		if err := j.writeColumns(sp, row, stripe, col, end, set[col*words:(col+1)*words]); err != nil {
			return err
		}
		col = end
	}
	// The pages are on the members (and their log io_units done).
	j.mu.Lock()
	c.mu.Lock()
	for _, key := range keys {
		e := c.pages[key]
		delete(c.pages, key)
		c.n.Add(-1)
		e.u.cached--
		j.wbDone(e.u)
		cpagePool.Put(e.b)
	}
	c.epoch.Add(1)
	c.mu.Unlock()
	j.mu.Unlock()
	return nil
}

// writeColumns is a partial-stripe write of the columns [c0, c1) (4 KiB
// pages of the chunk) of the data indexes in set, from row (the stripe
// row's data, data index d's chunk at d*chunk).
func (j *journal) writeColumns(sp *stripedPers, row []byte, stripe, c0, c1 uint64, set []uint64) error {
	a := j.a
	w := sp.work()
	defer w.release()
	slo, shi := c0*pageSectors, c1*pageSectors
	for d := range w.wlo {
		if set[d/64]&(1<<(uint(d)%64)) != 0 {
			w.wlo[d], w.whi[d] = slo, shi
		} else {
			w.wlo[d], w.whi[d] = 0, 0
		}
	}
	sp.g.Row(stripe, &w.row)
	a.lockStripe(stripe, slo, shi)
	defer a.unlockStripe(stripe, slo, shi)
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		w.freeBufs()
		_, err = sp.partialOnce(w, row, 0, slo, shi, false)
		if !isReadError(err) {
			break
		}
	}
	return err
}

// onMemberFailed is r5c_update_on_rdev_error: a write-back journal goes
// back to write-through (the cache written out) when the array is
// degraded.
func (j *journal) onMemberFailed() {
	if j.getMode() != JournalWriteBack || !j.c.switching.CompareAndSwap(false, true) {
		return
	}
	a := j.a
	go func() {
		defer j.c.switching.Store(false)
		if err := a.enter(0); err != nil {
			return // closing: the stop writes the cache out
		}
		defer a.leave(0)
		if err := j.setMode(JournalWriteThrough); err != nil {
			a.opts.Logf("md/raid:%s: switching the journal to write-through: %v", a.opts.Name, err)
		}
	}()
}

func cmpU64(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
