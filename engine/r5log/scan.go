package r5log

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Log is the journal member's log area: byte 0 is the journal member's
// data_offset (sector 0 of the log; all log positions are relative to it).
type Log interface {
	ReadAt(p []byte, off int64) (int, error)
}

// Mapper maps the array sector of a DATA payload (its location) to the
// member-relative stripe sector (sh->sector) and the member index of the
// data page, as raid5_compute_sector(conf, location, 0, &dd_idx, ...)
// does for the array's current geometry. The engine supplies it.
type Mapper func(arraySector uint64) (stripeSector uint64, dev int)

// Page is one data page of a stripe as recovery loads it.
type Page struct {
	Dev      int    // member index (dd_idx)
	Off      int64  // byte offset of the 4 KiB page in the log
	Location uint64 // array sector, from the DATA payload
	Checksum uint32 // the payload's checksum (verified against the page)
}

// Stripe is a stripe that recovery writes to the members (Plan.Replay) or
// keeps in the journal (Plan.DataOnly).
//
// Data is sorted by Dev. The kernel (r5l_recovery_replay_one_stripe) writes
// the stripe's pages one at a time, in ascending member index over data and
// parity members alike (P and Q at the stripe's pd_idx/qd_idx), each with a
// plain synchronous 4 KiB write to member sector Sector (and to the
// member's replacement, if any); the engine knows pd_idx/qd_idx.
type Stripe struct {
	Sector uint64 // member-relative stripe sector, = sh->sector
	Data   []Page
	P, Q   int64 // byte offsets of the parity pages in the log, -1 none
}

// Params describes the journal and array to Scan.
//
// Scan's inputs differ from a bare (log, size, tail, seed, mapper) because
// the kernel's recovery also depends on the parity count (raid6 checks a
// second parity checksum and steps over two parity pages per PARITY
// payload) and on the stripe cache size (when the cache runs out, stripes
// are replayed early, which changes the write order and, with flush
// payloads, which stripes are written at all).
type Params struct {
	// DevSectors is the journal member's rdev->sectors: the superblock's
	// data_size of the journal member. The ring is round_down(DevSectors, 8)
	// sectors long (log->device_size).
	DevSectors uint64
	// Tail is the superblock's journal_tail of the journal member (the
	// field shared with recovery_offset), in sectors.
	Tail uint64
	Seed uint32 // Seed(set_uuid)
	// MaxDegraded is conf->max_degraded: 1 for raid4/5, 2 for raid6.
	MaxDegraded int
	Map         Mapper
	// StripeCache is the stripe cache size (conf->max_nr_stripes) at the
	// start: 0 means the kernel default NR_STRIPES (256); a negative value
	// means unlimited (no early replays).
	StripeCache int
}

// Plan is the outcome of the kernel's journal recovery at array start
// (r5l_load_log, r5l_recovery_log).
type Plan struct {
	// Start is the log position where recovery looked (journal_tail after
	// r5l_load_log's sanity check) and StartSeq the seq of the meta block
	// found there (0 when Fresh).
	Start, StartSeq uint64

	// Replay are the data+parity stripes in the order the kernel writes
	// them to the members (the same stripe may appear more than once).
	// len(Replay) is the "data-parity stripes" count the kernel prints.
	Replay []Stripe
	// DataOnly are the stripes with data and no parity (write-back mode),
	// in the kernel's order; see Rewrites.
	DataOnly []Stripe

	// End is where the valid log ends: the kernel writes its next meta
	// block there (the empty one, or the first rewritten data-only
	// stripe), and End becomes the superblock's journal_tail. NextSeq is
	// that block's seq (the seq the next meta block would have had, plus
	// 10000). When Fresh, End is 0 and NextSeq is 0: the kernel uses a
	// random 32-bit seq (get_random_u32) that nobody can predict.
	End, NextSeq uint64

	// Fresh: the block at Start was not a valid meta block (bad magic or
	// version, checksum, or position != Start). The kernel then does no
	// recovery at all: it writes an empty meta block at position 0 with a
	// random 32-bit seq R, sets journal_tail = 0, and starts logging at
	// sector 8 with seq R+1.
	Fresh bool

	// MetaBlocks counts the meta blocks that passed the header checks
	// (r5l_recovery_read_meta_block), including Skipped ones.
	MetaBlocks int
	// Skipped counts meta blocks whose payloads failed verification (a
	// data/parity page checksum mismatch, an unknown payload type, a
	// payload overrunning meta_size). Their payloads are dropped and the
	// scan continues at the block right after the meta block itself (which
	// is normally its first data page, so the log effectively ends there).
	Skipped int

	// DevSize is log->device_size, the ring length in sectors.
	DevSize uint64
	// CacheGrowths counts how often the kernel would double the stripe
	// cache during the scan (raid5_set_cache_size).
	CacheGrowths int
}

// ErrStripeCache is returned when the kernel's recovery would fail because
// the stripe cache cannot grow any further (it is limited to 32768).
var ErrStripeCache = errors.New("r5log: recovery needs more than 32768 stripes in the stripe cache")

// Message returns the line the kernel logs after the scan
// (r5l_recovery_log), for array name name (e.g. "md0"), or "" when Fresh
// (the kernel says nothing then).
func (p *Plan) Message(name string) string {
	if p.Fresh {
		return ""
	}
	if len(p.DataOnly) == 0 && len(p.Replay) == 0 {
		return fmt.Sprintf("md/raid:%s: starting from clean shutdown", name)
	}
	return fmt.Sprintf("md/raid:%s: recovering %d data-only stripes and %d data-parity stripes",
		name, len(p.DataOnly), len(p.Replay))
}

// LogStart returns where the kernel appends its next io_unit after the
// recovery (log->log_start) and that io_unit's seq (log->seq). When Fresh
// the seq is unknown (random) and returned as 0 with pos 8.
func (p *Plan) LogStart() (pos, seq uint64) {
	if p.Fresh {
		return BlockSectors, 0
	}
	if len(p.DataOnly) == 0 {
		return p.ringAdd(p.End, BlockSectors), p.NextSeq + 1
	}
	pos = p.End
	for _, s := range p.DataOnly {
		pos = p.ringAdd(pos, BlockSectors*uint64(1+len(s.Data)))
	}
	return pos, p.NextSeq + uint64(len(p.DataOnly))
}

func (p *Plan) ringAdd(start, inc uint64) uint64 {
	return RingAdd(p.DevSize, start, inc)
}

// RingAdd is r5l_ring_add: one wrap at most, exactly like the kernel.
func RingAdd(size, start, inc uint64) uint64 {
	start += inc
	if start >= size {
		start -= size
	}
	return start
}

// Rewrite is one data-only stripe as the kernel rewrites it into the log
// after the scan (r5c_recovery_rewrite_data_only_stripes).
type Rewrite struct {
	Stripe uint64 // sh->sector
	Pos    uint64 // sector of the meta block
	Seq    uint64
	Meta   []byte // the 4096-byte meta block for Pos
	// Pages are copied from the old log position to the new one, in the
	// kernel's order: descending member index, each at the next block
	// after the meta block.
	Pages []PageCopy
}

// PageCopy copies one 4 KiB log page.
type PageCopy struct {
	Dev  int
	From int64  // byte offset of the source page in the log
	To   uint64 // destination sector in the log
}

// Rewrites returns, for the data-only stripes, the blocks the kernel
// writes: for each stripe in DataOnly order, a meta block at the current
// position with the current seq (starting at End/NextSeq) holding one DATA
// payload per data page (descending member index; size 8, location = the
// page's array sector, checksum = crc32c_le(seed, page)), the pages in the
// following blocks, then the next stripe right after. The kernel writes
// each stripe's pages first (plain writes) and its meta block last (FUA).
//
// The kernel holds all pages in memory while rewriting; a caller copying
// from the log must read every source page before writing a destination
// that overlaps one (only possible when the rewrite runs past Start).
func (p *Plan) Rewrites(seed uint32) []Rewrite {
	if p.Fresh || len(p.DataOnly) == 0 {
		return nil
	}
	out := make([]Rewrite, 0, len(p.DataOnly))
	pos, seq := p.End, p.NextSeq
	for _, s := range p.DataOnly {
		b := make([]byte, BlockSize)
		putHeader(b, seq, pos)
		off := offPayloads
		rw := Rewrite{Stripe: s.Sector, Pos: pos, Seq: seq, Meta: b, Pages: make([]PageCopy, 0, len(s.Data))}
		wp := p.ringAdd(pos, BlockSectors)
		for i := len(s.Data) - 1; i >= 0; i-- {
			d := s.Data[i]
			binary.LittleEndian.PutUint16(b[off+poffType:], TypeData)
			binary.LittleEndian.PutUint32(b[off+poffSize:], BlockSectors)
			binary.LittleEndian.PutUint64(b[off+poffLocation:], d.Location)
			binary.LittleEndian.PutUint32(b[off+poffChecksums:], d.Checksum)
			rw.Pages = append(rw.Pages, PageCopy{Dev: d.Dev, From: d.Off, To: wp})
			wp = p.ringAdd(wp, BlockSectors)
			off += DataParityHeaderSize + 4
		}
		seal(b, seed, uint32(off))
		out = append(out, rw)
		pos = wp
		seq++
	}
	return out
}

// Scan computes what Linux 6.1 does with the journal when the array
// starts: r5l_load_log's check of the block at journal_tail, then
// r5c_recovery_flush_log's scan (r5l_recovery_read_meta_block,
// r5l_recovery_verify_data_checksum_for_mb, r5c_recovery_analyze_meta_block)
// and the final replay of data-parity stripes. See the package
// documentation for the rules.
func Scan(log Log, p Params) (Plan, error) {
	if p.MaxDegraded != 1 && p.MaxDegraded != 2 {
		return Plan{}, fmt.Errorf("r5log: MaxDegraded %d, want 1 or 2", p.MaxDegraded)
	}
	if p.Map == nil {
		return Plan{}, errors.New("r5log: nil Mapper")
	}
	s := scanner{
		log:    log,
		seed:   p.Seed,
		maxDeg: p.MaxDegraded,
		mapper: p.Map,
		size:   p.DevSectors &^ (BlockSectors - 1),
		bySect: make(map[uint64]*rstripe),
	}
	s.plan.DevSize = s.size
	if s.size == 0 {
		return s.plan, errors.New("r5log: journal smaller than one block")
	}
	switch {
	case p.StripeCache < 0:
		s.unlimited = true
	case p.StripeCache == 0:
		s.cache = 256 // NR_STRIPES
	default:
		s.cache = p.StripeCache
	}

	// r5l_load_log: sanity check of journal_tail, then the block there.
	cp := p.Tail
	if cp >= p.DevSectors || cp%BlockSectors != 0 {
		cp = 0
	}
	s.plan.Start = cp
	s.meta = make([]byte, BlockSize+metaSlack)
	s.page = make([]byte, BlockSize)
	if err := s.read(s.meta[:BlockSize], cp); err != nil {
		return s.plan, err
	}
	mb := s.meta
	if binary.LittleEndian.Uint32(mb[offMagic:]) != Magic || mb[offVersion] != Version ||
		binary.LittleEndian.Uint32(mb[offChecksum:]) != MetaChecksum(s.seed, mb) ||
		binary.LittleEndian.Uint64(mb[offPosition:]) != cp {
		s.plan.Fresh = true
		return s.plan, nil
	}
	s.plan.StartSeq = binary.LittleEndian.Uint64(mb[offSeq:])

	// r5c_recovery_flush_log.
	pos, seq := cp, s.plan.StartSeq
	for {
		ok, err := s.readMeta(pos, seq)
		if err != nil {
			return s.plan, err
		}
		if !ok {
			break
		}
		s.plan.MetaBlocks++
		total, ok, err := s.analyze(pos)
		if err != nil {
			return s.plan, err
		}
		if !ok {
			s.plan.Skipped++
			total = BlockSectors
		}
		seq++
		pos = RingAdd(s.size, pos, total)
	}
	s.replayStripes()
	s.plan.DataOnly = make([]Stripe, 0, s.n)
	for st := s.head; st != nil; st = st.next {
		s.plan.DataOnly = append(s.plan.DataOnly, st.export())
	}
	s.plan.End = pos
	s.plan.NextSeq = seq + 10000
	return s.plan, nil
}

// metaSlack zero bytes after the meta page: the kernel may read a
// payload's type/size/checksums a few bytes past the page when a
// malformed payload starts near its end (it then reads whatever memory
// follows; we read zeros).
const metaSlack = 32

type scanner struct {
	log    Log
	seed   uint32
	maxDeg int
	mapper Mapper
	size   uint64 // device_size
	meta   []byte // current meta block (+ slack)
	page   []byte
	plan   Plan

	// the cached stripe list (ctx->cached_list), in order
	head, tail *rstripe
	n          int
	bySect     map[uint64]*rstripe
	free       *rstripe // recycled nodes

	// stripe cache model
	unlimited bool
	cache     int    // conf->min_nr_stripes == max_nr_stripes
	active    [8]int // stripes of the list per hash bucket
}

// rstripe is a stripe_head during recovery.
type rstripe struct {
	sector     uint64
	caching    bool // STRIPE_R5C_CACHING
	wantP      bool // R5_Wantwrite on pd_idx
	p, q       int64
	data       []Page
	prev, next *rstripe
}

func (st *rstripe) export() Stripe {
	s := Stripe{Sector: st.sector, P: -1, Q: -1}
	if len(st.data) > 0 {
		s.Data = append([]Page(nil), st.data...)
	}
	if st.wantP {
		s.P, s.Q = st.p, st.q
	}
	return s
}

func (st *rstripe) reset() {
	st.caching, st.wantP = false, false
	st.p, st.q = -1, -1
	st.data = st.data[:0]
}

func (s *scanner) read(b []byte, sector uint64) error {
	n, err := s.log.ReadAt(b, int64(sector)*512)
	if n == len(b) {
		return nil
	}
	if err == nil {
		err = errors.New("short read")
	}
	return fmt.Errorf("r5log: reading log sector %d: %w", sector, err)
}

// readMeta is r5l_recovery_read_meta_block.
func (s *scanner) readMeta(pos, seq uint64) (bool, error) {
	if pos >= s.size {
		return false, nil
	}
	mb := s.meta
	if err := s.read(mb[:BlockSize], pos); err != nil {
		return false, err
	}
	if binary.LittleEndian.Uint32(mb[offMagic:]) != Magic ||
		binary.LittleEndian.Uint64(mb[offSeq:]) != seq ||
		mb[offVersion] != Version ||
		binary.LittleEndian.Uint64(mb[offPosition:]) != pos {
		return false, nil
	}
	if binary.LittleEndian.Uint32(mb[offChecksum:]) != MetaChecksum(s.seed, mb) {
		return false, nil
	}
	if binary.LittleEndian.Uint32(mb[offMetaSize:]) > BlockSize {
		return false, nil
	}
	return true, nil
}

// pageSum returns crc32c_le(seed, page at sector), and false if the sector
// lies outside the ring (possible only for absurd payload sizes in a
// checksum-valid meta block; the kernel would read past the log there).
func (s *scanner) pageSum(sector uint64) (uint32, bool, error) {
	if sector >= s.size {
		return 0, false, nil
	}
	if err := s.read(s.page, sector); err != nil {
		return 0, false, err
	}
	return Checksum(s.seed, s.page), true, nil
}

// verify is r5l_recovery_verify_data_checksum_for_mb.
func (s *scanner) verify(pos uint64) (bool, error) {
	mb := s.meta
	size := uint64(binary.LittleEndian.Uint32(mb[offMetaSize:]))
	off := uint64(offPayloads)
	logOff := RingAdd(s.size, pos, BlockSectors)
	for off < size {
		typ := binary.LittleEndian.Uint16(mb[off+poffType:])
		psize := uint64(binary.LittleEndian.Uint32(mb[off+poffSize:]))
		var plen uint64
		switch typ {
		case TypeData, TypeParity:
			plen = DataParityHeaderSize + 4*(psize>>3)
			if off+plen > size {
				return false, nil
			}
			sum, ok, err := s.pageSum(logOff)
			if err != nil || !ok || sum != binary.LittleEndian.Uint32(mb[off+poffChecksums:]) {
				return false, err
			}
			if typ == TypeParity && s.maxDeg == 2 {
				sum, ok, err := s.pageSum(RingAdd(s.size, logOff, BlockSectors))
				if err != nil || !ok || sum != binary.LittleEndian.Uint32(mb[off+poffChecksums+4:]) {
					return false, err
				}
			}
			logOff = RingAdd(s.size, logOff, psize)
		case TypeFlush:
			plen = FlushHeaderSize + psize
			if off+plen > size {
				return false, nil
			}
		default:
			return false, nil
		}
		off += plen
	}
	return true, nil
}

// analyze is r5c_recovery_analyze_meta_block; it returns
// ctx->meta_total_blocks, or ok=false for -EAGAIN.
func (s *scanner) analyze(pos uint64) (total uint64, ok bool, err error) {
	if ok, err := s.verify(pos); !ok || err != nil {
		return 0, false, err
	}
	total = BlockSectors
	mb := s.meta
	size := uint64(binary.LittleEndian.Uint32(mb[offMetaSize:]))
	off := uint64(offPayloads)
	logOff := RingAdd(s.size, pos, BlockSectors)
	for off < size {
		typ := binary.LittleEndian.Uint16(mb[off+poffType:])
		psize := uint64(binary.LittleEndian.Uint32(mb[off+poffSize:]))
		if typ == TypeFlush {
			count := psize / 8
			for i := uint64(0); i < count; i++ {
				sect := binary.LittleEndian.Uint64(mb[off+poffStripes+8*i:])
				if st := s.bySect[sect]; st != nil {
					s.drop(st)
				}
			}
			off += FlushHeaderSize + psize
			continue
		}
		// DATA or PARITY (verify rejected anything else).
		loc := binary.LittleEndian.Uint64(mb[off+poffLocation:])
		var sect uint64
		dev := -1
		if typ == TypeData {
			sect, dev = s.mapper(loc)
		} else {
			sect = loc
		}
		st := s.bySect[sect]
		if st == nil {
			if st, err = s.alloc(sect); err != nil {
				return 0, false, err
			}
		}
		sum := binary.LittleEndian.Uint32(mb[off+poffChecksums:])
		if typ == TypeData {
			if !st.caching && st.wantP {
				s.replayOne(st)
				s.moveTail(st)
			}
			st.loadData(Page{Dev: dev, Off: int64(logOff) * 512, Location: loc, Checksum: sum})
			total += BlockSectors
		} else {
			total += BlockSectors * uint64(s.maxDeg)
			st.p, st.wantP = int64(logOff)*512, true
			if s.maxDeg == 2 {
				st.q = int64(RingAdd(s.size, logOff, BlockSectors)) * 512
			}
			st.caching = false
		}
		logOff = RingAdd(s.size, logOff, psize)
		off += DataParityHeaderSize + 4*(psize>>3)
	}
	return total, true, nil
}

func (st *rstripe) loadData(pg Page) {
	st.caching = true
	for i := range st.data {
		if st.data[i].Dev == pg.Dev {
			st.data[i] = pg
			return
		}
		if st.data[i].Dev > pg.Dev {
			st.data = append(st.data, Page{})
			copy(st.data[i+1:], st.data[i:])
			st.data[i] = pg
			return
		}
	}
	st.data = append(st.data, pg)
}

// replayOne is r5l_recovery_replay_one_stripe: stripes without data are
// not written (their data reached the members before the crash).
func (s *scanner) replayOne(st *rstripe) {
	if len(st.data) > 0 {
		s.plan.Replay = append(s.plan.Replay, st.export())
	}
	st.reset()
}

// replayStripes is r5c_recovery_replay_stripes.
func (s *scanner) replayStripes() {
	for st := s.head; st != nil; {
		next := st.next
		if !st.caching {
			s.replayOne(st)
			s.remove(st)
		}
		st = next
	}
}

// drop handles a flush payload naming a listed stripe: reset and release
// without writing.
func (s *scanner) drop(st *rstripe) {
	st.reset()
	s.remove(st)
}

func bucket(sect uint64) int { return int(sect>>3) & 7 }

// capacity of hash bucket b in a cache of n stripes (grow_one_stripe
// assigns hash_lock_index = max_nr_stripes % 8 to each new stripe).
func capacity(n, b int) int {
	c := n / 8
	if n%8 > b {
		c++
	}
	return c
}

// alloc is r5c_recovery_alloc_stripe with the kernel's fallbacks when the
// stripe's hash bucket has no free stripe_head.
func (s *scanner) alloc(sect uint64) (*rstripe, error) {
	b := bucket(sect)
	if !s.unlimited && s.active[b] >= capacity(s.cache, b) {
		s.replayStripes()
		if s.active[b] >= capacity(s.cache, b) {
			n := s.cache * 2
			if n > 32768 {
				return nil, ErrStripeCache
			}
			s.cache = n
			s.plan.CacheGrowths++
		}
	}
	st := s.free
	if st != nil {
		s.free = st.next
		st.next = nil
	} else {
		st = &rstripe{}
	}
	st.sector = sect
	st.reset()
	s.append(st)
	return st, nil
}

func (s *scanner) append(st *rstripe) {
	st.prev, st.next = s.tail, nil
	if s.tail != nil {
		s.tail.next = st
	} else {
		s.head = st
	}
	s.tail = st
	s.n++
	s.bySect[st.sector] = st
	s.active[bucket(st.sector)]++
}

func (s *scanner) unlink(st *rstripe) {
	if st.prev != nil {
		st.prev.next = st.next
	} else {
		s.head = st.next
	}
	if st.next != nil {
		st.next.prev = st.prev
	} else {
		s.tail = st.prev
	}
	st.prev, st.next = nil, nil
}

func (s *scanner) remove(st *rstripe) {
	s.unlink(st)
	s.n--
	delete(s.bySect, st.sector)
	s.active[bucket(st.sector)]--
	st.next = s.free
	s.free = st
}

func (s *scanner) moveTail(st *rstripe) {
	if s.tail == st {
		return
	}
	s.unlink(st)
	st.prev = s.tail
	s.tail.next = st
	s.tail = st
}
