package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"mdtool/bitmap"
	"mdtool/engine/layout"
	"mdtool/superblock"
)

// RMWPolicy is md's rmw_level: how partial-stripe writes of raid4/5 pick
// between read-modify-write and reconstruct-write.
type RMWPolicy int

const (
	// RMWEnable picks whichever needs fewer member reads, reconstruct-write
	// on a tie (md PARITY_ENABLE_RMW, the default).
	RMWEnable RMWPolicy = iota
	// RMWDisable always uses reconstruct-write (PARITY_DISABLE_RMW).
	RMWDisable
	// RMWPrefer uses read-modify-write unless it is impossible or needs
	// more reads (PARITY_PREFER_RMW: read-modify-write on a tie).
	RMWPrefer
)

// Options tune Open.
type Options struct {
	// Metadata is the superblock version to look for: "1.0", "1.1" or
	// "1.2"; "" tries all three and keeps the latest ctime, as mdadm does.
	Metadata string
	// ReadOnly refuses writes and never touches the metadata.
	ReadOnly bool
	// Force starts a dirty degraded raid4/5/6, which md refuses unless
	// start_dirty_degraded is set (data may be silently wrong).
	Force bool
	// MaxRequest is the largest member-set request in bytes, default
	// 1 MiB; the engine rounds it to a multiple of the full stripe
	// (at least one).
	MaxRequest int64
	// SafeModeDelay is md's safe_mode_delay: how long after the last
	// write the array is marked clean again. Default 200 ms; negative:
	// only on Close.
	SafeModeDelay time.Duration
	// NoDaemon disables the background goroutine (safe mode and bitmap
	// daemon); call Tick instead.
	NoDaemon bool
	// RMW selects the partial-stripe write strategy of raid4/5.
	RMW RMWPolicy
	// Clock replaces time.Now (tests).
	Clock func() time.Time
	// Logf receives kernel-log-like messages (member failures, repairs).
	Logf func(format string, args ...any)
	// Name is the array's name in those messages (the kernel's mdname,
	// e.g. "md0"); default "md".
	Name string
	// MaxCorrectedReadErrors is md's max_read_errors (sysfs
	// max_corr_read_errors): a raid10 member that needs more read-error
	// repairs than this, counted with md's decay (halved for every hour
	// since the previous one), fails. Default 20; negative: no limit.
	MaxCorrectedReadErrors int
	// NotPersistent: the array has no superblocks (OpenBuild, mdadm
	// --build); nothing is ever written outside the data.
	NotPersistent bool
	// NoAutoSync keeps the background goroutine from starting a resync
	// or a recovery on its own (md_check_recovery); AddDevice, Replace,
	// FailDevice and StartAction still start one. For tests.
	NoAutoSync bool
	// ReshapeBackup is the backup file of an in-place reshape (mdadm's
	// --assemble --backup-file): Open restores its critical section
	// when the superblocks say it was in flight (reshape_backup.go).
	ReshapeBackup BackupFile
	// BitmapFile is an external write-intent bitmap file (mdadm
	// --assemble --bitmap=FILE; bitmapfile.go). The caller closes it.
	BitmapFile *os.File
}

// DefaultOptions returns the options of a normal open: any 1.x metadata,
// read-write, 1 MiB requests, 200 ms safe mode delay.
func DefaultOptions() Options {
	return Options{}
}

// member is one device of the array.
type member struct {
	dev         Device
	index       int // position in the devices given to Open
	role        int // -1 for a spare
	ls          *loadedSuper
	dataOff     int64 // bytes
	newOff      int64 // bytes: data_offset + new_offset during a reshape (the new geometry's data)
	lbs         int64
	state       atomic.Uint32   // MemberState
	recovery    atomic.Uint64   // member sectors valid while Recovering
	pending     atomic.Int64    // reads in flight (raid1/10 read balancing)
	lat         LatencyReporter // the device's, if it reports its latency (read balancing)
	corrected   atomic.Uint32
	writeMostly bool
	failFast    bool
	sbEvents    uint64 // events of the superblock last written/read
	slotFreed   bool   // faulty, and md's remove_and_add_spares took it out of its slot (cfgMu)
	memory      bool   // the device works at memory speed
	// recCP is the recovery_offset recorded in the superblocks (md's
	// rdev->recovery_offset, updated at checkpoints); recovery is the
	// live position.
	recCP atomic.Uint64
	// savedRole is md's saved_raid_disk: the role of a re-added member,
	// recovered guided by the bitmap; -1 means a full recovery.
	savedRole int
	// replacement: the member rebuilds as the replacement of the member
	// in its role (MD_FEATURE_REPLACEMENT).
	replacement bool
	removed     atomic.Bool // taken out by RemoveDevice
	hotAdded    bool        // added to the running array (AddDevice): md's rdev list has it first
	// readErrs and lastReadErr are md's rdev->read_errors and
	// last_read_error (unix seconds), kept by raid10's read-error path.
	readErrMu   sync.Mutex
	readErrs    int
	lastReadErr int64
}

func (m *member) State() MemberState { return MemberState(m.state.Load()) }

// readable says whether member sectors [s, s+n) hold valid data.
func (m *member) readable(s, n uint64) bool {
	if m == nil {
		return false
	}
	switch MemberState(m.state.Load()) {
	case InSync:
		return true
	case Recovering:
		return s+n <= m.recovery.Load()
	}
	return false
}

// writable says whether writes go to the member at all.
func (m *member) writable() bool {
	if m == nil {
		return false
	}
	st := MemberState(m.state.Load())
	return st == InSync || st == Recovering
}

// Array is an assembled md array. All methods are safe for concurrent use.
type Array struct {
	opts    Options
	geo     layout.Geometry
	striped *layout.Striped
	rs      *reshapeState // a reshape recorded in the superblocks at Open (reshape.go), nil otherwise
	level   layout.Level
	// stripeCache is raid5's stripe_cache_size in pages as mdadm last
	// raised it (0: md's default, 256; a level change starts over)
	stripeCache int
	n           int
	roles       []*member // by role, nil = missing
	jm          *member   // the write journal's member (journal.go), nil: none
	jnl         *journal  // the running write journal, nil: none or read-only
	// journalFeature: the superblocks have MD_FEATURE_JOURNAL
	journalFeature bool
	all            []*member // every device given to Open that took part
	assembled      int       // how many of all Open made (the rest were added since)
	devs           []Device
	size           int64 // bytes
	block          int64 // logical block size of the array, bytes
	unit           int64 // split unit (full stripe) in bytes, 0 = none
	maxReq         int64
	lockSec        uint64 // lock region size in sectors for raid1/10
	pers           personality
	locks          rangeLocks
	bm             writeIntent
	hasBM          bool
	bmFile         *os.File     // the bitmap is this file (bitmapfile.go), not in the members
	bmMu           sync.RWMutex // held to swap bm (growbitmap.go) and by readers outside the request path
	meta           metaState
	// missedWrites: a write completed while a raid1/raid10 without a
	// bitmap was degraded, so a role not in sync missed it (noteMissed,
	// recover_readd.go).
	missedWrites atomic.Bool
	stats        engineStats

	inflight inflightCounter
	closed   atomic.Bool
	drained  chan struct{}
	cancel   context.CancelFunc
	done     chan struct{}
	closeMu  sync.Mutex
	isClosed bool
	uuid     [16]byte
	failed   atomic.Bool
	failMu   sync.Mutex // serialises failure decisions

	// cfgMu guards changes of roles, all and devs (spares taking a role,
	// added devices); user I/O is suspended while they change.
	cfgMu     sync.RWMutex
	suspended atomic.Bool
	suspMu    sync.Mutex
	suspCond  *sync.Cond
	userIO    shardedCounter // user requests, for md's is_mddev_idle
	sc        syncCtl
	grow      growState // size changes (growsize.go)

	// takenOver: the level was changed in this run (takeover.go)
	takenOver atomic.Bool
}

// Open assembles the array whose members are devs (in any order; spares
// and stale members are recognised from their superblocks). It reads the
// superblocks, makes the members, sets the geometry up, checks that the
// array can run, loads its state and bitmap and starts the daemon.
func Open(devs []Device, opts Options) (*Array, error) {
	opts = opts.withDefaults()
	minor, err := metadataMinor(opts.Metadata)
	if err != nil {
		return nil, err
	}
	as, err := assemble(devs, minor)
	if err != nil {
		return nil, err
	}
	return openAssembled(devs, as, opts)
}

// openAssembled is Open after the superblocks were matched (or made up
// by OpenBuild for an array without superblocks).
func openAssembled(devs []Device, as *assembly, opts Options) (*Array, error) {
	ref := as.ref.sb
	a := &Array{opts: opts, devs: devs, n: int(ref.StateSlots()), drained: make(chan struct{}, 1), uuid: ref.SetUUID}
	a.suspCond = sync.NewCond(&a.suspMu)
	a.sc.init()
	a.level = layout.Level(ref.Level)
	a.addMembers(as)
	a.assembled = len(a.all)
	a.adoptFinishedReshape(ref)
	restore, err := a.readReshapeBackup(ref)
	if err != nil {
		return nil, err
	}
	if err := a.setGeometry(ref); err != nil {
		return nil, err
	}
	a.attachSlide(ref)
	if err := a.checkDataAreas(); err != nil {
		return nil, err
	}
	if err := a.checkRedundancy(); err != nil {
		return nil, err
	}
	if err := a.loadState(ref); err != nil {
		return nil, err
	}
	if err := a.openJournal(ref); err != nil {
		return nil, err
	}
	a.bm = noBitmap{}
	if ref.FeatureMap&superblock.FeatureBitmapOffset != 0 && a.redundant() && opts.BitmapFile == nil {
		if err := a.openBitmap(as); err != nil {
			return nil, err
		}
	}
	if err := a.openFileBitmap(); err != nil {
		return nil, err
	}
	switch {
	case a.reshaping():
		a.pers = a.newReshapePers()
	case a.striped != nil:
		a.pers = &stripedPers{a: a, g: a.striped, r6: a.level == layout.RAID6}
	case a.multipath():
		a.pers = &multipathPers{a: a}
	default:
		a.pers = &mappedPers{a: a}
	}
	if restore != nil {
		if err := a.restoreBackup(restore); err != nil {
			return nil, err
		}
	}
	if err := a.recoverJournal(); err != nil {
		return nil, err
	}
	a.startDaemon()
	for _, m := range a.all {
		a.watchLoss(m)
	}
	return a, nil
}

// withDefaults fills in the defaults of Options.
func (opts Options) withDefaults() Options {
	if opts.MaxRequest <= 0 {
		opts.MaxRequest = 1 << 20
	}
	if opts.SafeModeDelay == 0 {
		opts.SafeModeDelay = 200 * time.Millisecond
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.MaxCorrectedReadErrors == 0 {
		opts.MaxCorrectedReadErrors = 20 // MD_DEFAULT_MAX_CORRECTED_READ_ERRORS
	}
	return opts
}

// metadataMinor is the superblock minor version Options.Metadata asks
// for; -1: any.
func metadataMinor(metadata string) (int, error) {
	switch metadata {
	case "":
		return -1, nil
	case "1.0":
		return 0, nil
	case "1.1":
		return 1, nil
	case "1.2":
		return 2, nil
	case "0.90":
		return Minor090, nil
	}
	return -1, fmt.Errorf("%w: metadata %q (only 0.90, 1.0, 1.1, 1.2)", ErrUnsupported, metadata)
}

// addMembers makes the members the assembly found: the members of the
// roles (partly recovered ones Recovering), the spares and the
// replacements being rebuilt.
func (a *Array) addMembers(as *assembly) {
	a.roles = make([]*member, a.n)
	mk := func(i, role int) *member {
		ls := as.supers[i]
		dev := a.devs[i]
		m := &member{dev: dev, lat: latencyOf(dev), index: i, role: role, ls: ls, dataOff: int64(ls.sb.DataOffset) * 512,
			newOff: int64(ls.sb.NewDataOffset()) * 512, lbs: int64(dev.Geometry().LogicalBlock), sbEvents: ls.sb.Events, memory: dev.Geometry().Memory,
			savedRole: -1}
		m.writeMostly = ls.sb.DevFlags&superblock.DevFlagWriteMostly != 0
		m.failFast = ls.sb.DevFlags&superblock.DevFlagFailFast != 0
		m.corrected.Store(ls.sb.CntCorrectedRead)
		if m.lbs < 512 {
			m.lbs = 512
		}
		a.all = append(a.all, m)
		return m
	}
	for role, i := range as.roleDev {
		if i < 0 {
			continue
		}
		m := mk(i, role)
		sb := as.supers[i].sb
		if sb.FeatureMap&superblock.FeatureRecoveryOffset != 0 {
			// super_1_validate: a partly recovered member, resumed from
			// its recovery_offset; guided by the bitmap when it was a
			// re-add (MD_FEATURE_RECOVERY_BITMAP).
			m.state.Store(uint32(Recovering))
			m.recovery.Store(sb.RecoveryOffset)
			m.recCP.Store(sb.RecoveryOffset)
			if sb.FeatureMap&superblock.FeatureRecoveryBitmap != 0 {
				m.savedRole = role
			}
			// A replacement found without the member it replaced takes
			// the role (raid5_run/raid1_run move it into the slot).
		} else {
			m.state.Store(uint32(InSync))
		}
		a.roles[role] = m
	}
	for _, i := range as.spares {
		m := mk(i, -1)
		m.state.Store(uint32(Spare))
	}
	if as.journal >= 0 {
		m := mk(as.journal, -1)
		m.state.Store(uint32(Journal))
		a.jm = m
	}
	for role, i := range as.repl {
		// A replacement that was being rebuilt: resumed by the sync thread.
		m := mk(i, role)
		sb := as.supers[i].sb
		m.state.Store(uint32(Recovering))
		m.recovery.Store(sb.RecoveryOffset)
		m.recCP.Store(sb.RecoveryOffset)
		m.replacement = true
	}
}

// setGeometry sets the data layout up from the reference superblock and
// derives the array size, block size, split unit, request limit and lock
// region size.
func (a *Array) setGeometry(ref *superblock.Superblock) error {
	p := layout.Params{
		Level:            a.level,
		Layout:           int(ref.Layout),
		ChunkSectors:     uint64(ref.ChunkSize),
		RaidDisks:        int(ref.RaidDisks),
		ComponentSectors: ref.Size,
	}
	if a.level == layout.RAID0 && ref.FeatureMap&superblock.FeatureRAID0Layout == 0 {
		p.Layout = -1
	}
	if a.level == layout.Linear || a.level == layout.RAID0 {
		p.DevSectors = make([]uint64, a.n)
		for r, m := range a.roles {
			if m == nil {
				return fmt.Errorf("%w: %v needs every member, role %d is missing", ErrFailed, a.level, r)
			}
			p.DevSectors[r] = m.ls.sb.DataSize
		}
	}
	var err error
	if reshapeActive(ref) {
		a.geo, err = a.reshapeGeometry(ref, p)
	} else {
		a.geo, err = layout.New(p)
	}
	if err != nil {
		return err
	}
	if s, ok := a.geo.(*layout.Striped); ok {
		a.striped = s
	}
	if g, ok := a.geo.(*layout.RAID10Geometry); ok && g.FarSetSize() < g.FarCopies() {
		// raid10 setup_geo runs the buggy far-set layout (version 1)
		// with this warning; so does the engine, with the same mapping.
		a.opts.Logf("md/raid10: This RAID10 layout does not provide data safety - please backup and create new array")
	}
	a.size = int64(a.geo.ArraySectors()) * 512
	if a.reshaping() {
		a.size = int64(a.rs.geo.ArraySectors()) * 512
	}
	if a.size == 0 {
		// Nothing to serve: members whose data area (or the component
		// size) is smaller than one chunk, or 0.
		return fmt.Errorf("%w (%v, component size %d sectors)", ErrZeroSize, a.level, ref.Size)
	}
	a.block = 512
	for _, m := range a.all {
		if m.lbs > a.block {
			a.block = m.lbs
		}
	}
	a.unit = int64(a.geo.IOOpt())
	switch a.level {
	case layout.RAID1:
		a.lockSec = 2048
	case layout.RAID10:
		a.lockSec = a.geo.IOOpt() >> 9
	}
	if a.unit > 0 {
		a.maxReq = a.opts.MaxRequest / a.unit * a.unit
		if a.maxReq < a.unit {
			a.maxReq = a.unit
		}
	} else {
		a.maxReq = a.opts.MaxRequest
	}
	return nil
}

// checkDataAreas checks that every member holds its data area.
func (a *Array) checkDataAreas() error {
	for _, m := range a.all {
		need := max(m.dataOff, m.newOff)
		if m.role >= 0 {
			need += int64(a.geo.DevSectors(m.role)) * 512
		}
		if need > m.dev.Geometry().Size {
			return fmt.Errorf("engine: device %d is too small for its data area", m.index)
		}
	}
	return nil
}

// loadState takes the events, the resync checkpoint and the clean state
// from the reference superblock, and refuses a dirty degraded raid4/5/6
// unless Force.
func (a *Array) loadState(ref *superblock.Superblock) error {
	a.meta.events = ref.Events
	a.meta.recoveryCP = ref.ResyncOffset
	if a.level == layout.RAID1 && a.n-a.degraded() == 1 {
		// raid1's run(): a single working copy has nothing to resync.
		a.meta.recoveryCP = superblock.MaxSector
	}
	// md marks a dirty array clean at its first md_check_recovery (an
	// event) only when a resync is still pending after the personality's
	// run: a single raid1 copy (recovery_cp set to MaxSector above) starts
	// clean with its events as they are.
	a.meta.inSync = a.meta.recoveryCP == superblock.MaxSector
	if a.meta.inSync || !a.redundant() {
		a.meta.inSync = true
		a.meta.state.Store(stateClean)
	}
	// raid5_run: members that are only partly recovered hold parity for
	// what is beyond their recovery offset, so they do not count against
	// a dirty array (dirty_parity_disks).
	if !a.meta.inSync && a.degraded()-a.recovering() > 0 && a.striped != nil && !a.opts.Force {
		return fmt.Errorf("%w: cannot start dirty degraded array (use Force)", ErrFailed)
	}
	return nil
}

// startDaemon starts the background goroutine (safe mode, bitmap daemon,
// sync thread) unless NoDaemon or ReadOnly.
func (a *Array) startDaemon() {
	if a.opts.NoDaemon || a.opts.ReadOnly {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.done = make(chan struct{})
	// md_run wakes the sync thread at once: a pending resync or recovery
	// shows in sync_action as soon as the array runs, so a `wait` right
	// after assembly waits for it.
	// md_check_recovery marks an array started dirty (a resync pending)
	// clean (set_in_sync, md_update_sb: events+1) before it starts the
	// sync thread, so md records every checkpoint of the resync; the
	// engine's daemon would do it only at its first tick, which a loaded
	// machine lets the resync overtake.
	a.safeMode(a.opts.Clock())
	if !a.opts.NoAutoSync {
		a.checkRecovery()
	}
	go a.daemon(ctx)
}

// recovering counts roles whose member is being recovered.
func (a *Array) recovering() int {
	n := 0
	for _, m := range a.roles {
		if m != nil && m.State() == Recovering {
			n++
		}
	}
	return n
}

// redundant says whether the level has redundancy (and so a clean/active
// state, a bitmap and superblock updates on write).
func (a *Array) redundant() bool {
	switch a.level {
	case layout.RAID1, layout.RAID4, layout.RAID5, layout.RAID6, layout.RAID10:
		return true
	}
	return false
}

// degraded counts roles without an in-sync member (md's mddev->degraded).
func (a *Array) degraded() int {
	if a.reshaping() {
		return a.reshapeDegraded()
	}
	d := 0
	for _, m := range a.roles {
		if m == nil || m.State() != InSync {
			d++
		}
	}
	return d
}

// maxDegraded is how many roles the level can lose.
func (a *Array) maxDegraded() int {
	switch a.level {
	case layout.RAID1, layout.Multipath:
		return a.n - 1
	case layout.RAID4, layout.RAID5:
		return 1
	case layout.RAID6:
		return 2
	}
	return 0
}

// checkRedundancy fails when the working members cannot serve every
// sector.
func (a *Array) checkRedundancy() error {
	// Like md's degraded count, only in-sync members serve every sector:
	// a member being recovered does not count.
	working := func(r int) bool {
		m := a.roles[r]
		return m != nil && m.State() == InSync && !m.removed.Load()
	}
	switch a.level {
	case layout.RAID10:
		// Every chunk needs one working copy. Copy patterns repeat
		// within the first raid_disks × copies chunks.
		c := a.geo.ChunkSectors()
		locs := make([]layout.Loc, a.geo.MaxCopies())
		limit := uint64(a.n*a.geo.MaxCopies()) * 2
		for i := uint64(0); i < limit && i*c < a.geo.ArraySectors(); i++ {
			locs, _ = a.geo.Map(i*c, locs)
			ok := false
			for _, l := range locs {
				if working(l.Role) {
					ok = true
				}
			}
			if !ok {
				return fmt.Errorf("%w: no working copy of chunk %d", ErrFailed, i)
			}
		}
		return nil
	case layout.RAID0, layout.Linear:
		for r := range a.roles {
			if !working(r) {
				return fmt.Errorf("%w: role %d", ErrFailed, r)
			}
		}
		return nil
	}
	bad := 0
	for r := range a.roles {
		if !working(r) {
			bad++
		}
	}
	if a.reshaping() {
		bad = a.reshapeDegraded() // each geometry on its own
	}
	if bad > a.maxDegraded() || bad == a.n {
		return fmt.Errorf("%w: %d of %d members missing or faulty", ErrFailed, bad, a.n)
	}
	return nil
}

// Size is the array size in bytes.
func (a *Array) Size() int64 { return a.size }

// BlockSize is the logical block size: requests must be aligned to it.
func (a *Array) BlockSize() int64 { return a.block }

// IOOpt is the optimal request size (full stripe) in bytes, 0 if none.
func (a *Array) IOOpt() int64 { return a.unit }

// IOMin is the minimum efficient request size (chunk) in bytes, 0 if none.
func (a *Array) IOMin() int64 { return int64(a.geo.IOMin()) }

// Geometry is the array's data layout.
func (a *Array) Geometry() layout.Geometry {
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	return a.geo
}

// UUID is the array UUID.
func (a *Array) UUID() [16]byte { return a.uuid }

// MemberInfo describes one member.
type MemberInfo struct {
	Device         int // index in the devices given to Open, -1 when missing
	Role           int // -1 for spares
	State          MemberState
	RecoveryOffset uint64 // member sectors, while Recovering
	WriteMostly    bool
	Events         uint64 // of its superblock as last written or read
	CorrectedReads uint32
}

// Members describes each role (Missing when no device) followed by the
// other devices: spares, faulty members (Role -1) and a replacement being
// rebuilt (with the Role it replaces).
func (a *Array) Members() []MemberInfo {
	a.cfgMu.RLock()
	ms := make([]*member, 0, len(a.all)+a.n)
	for _, m := range a.roles {
		if m != nil && m.removed.Load() {
			m = nil
		}
		ms = append(ms, m)
	}
	for _, m := range a.all {
		if !m.removed.Load() && (m.role < 0 || a.roles[m.role] != m) {
			ms = append(ms, m) // spares, faulty members and replacements
		}
	}
	a.cfgMu.RUnlock()
	out := make([]MemberInfo, 0, len(ms))
	for r, m := range ms {
		if m == nil {
			out = append(out, MemberInfo{Device: -1, Role: r, State: Missing})
			continue
		}
		out = append(out, a.info(m))
	}
	return out
}

func (a *Array) info(m *member) MemberInfo {
	a.meta.mu.Lock()
	ev := m.sbEvents
	a.meta.mu.Unlock()
	return MemberInfo{Device: m.index, Role: m.role, State: m.State(), RecoveryOffset: m.recovery.Load(),
		WriteMostly: m.writeMostly, Events: ev, CorrectedReads: m.corrected.Load()}
}

// Events is the current event count.
func (a *Array) Events() uint64 {
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	return a.meta.events
}

// Clean reports md's in_sync: no write is pending since the superblocks
// were last marked clean.
func (a *Array) Clean() bool {
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	return a.meta.inSync
}

// Degraded is the number of roles without an in-sync member.
func (a *Array) Degraded() int {
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	return a.degraded()
}

// enter admits a request keyed by key (its offset in MiB: requests on
// different regions count in different shards, so that concurrent
// requests do not share one cache line).
func (a *Array) enter(key uint64) error {
	for {
		a.inflight.add(key, 1)
		if a.closed.Load() {
			a.leave(key)
			return ErrClosed
		}
		if !a.suspended.Load() {
			return nil
		}
		// A configuration change (a spare taking a role) waits for the
		// requests in flight; wait for it to end.
		a.leave(key)
		a.suspMu.Lock()
		for a.suspended.Load() {
			a.suspCond.Wait()
		}
		a.suspMu.Unlock()
	}
}

func (a *Array) leave(key uint64) {
	a.inflight.add(key, -1)
	if a.closed.Load() && a.inflight.zero() {
		select {
		case a.drained <- struct{}{}:
		default:
		}
	}
}

// inflightCounter counts the requests in flight in shards. A request
// enters and leaves the same shard, so each shard is never negative; the
// flags (closed, suspended) are set before the shards are summed and
// read after a request is counted, so a request is either seen in the
// sum or sees the flag.
type inflightCounter struct {
	c [counterShards]struct {
		v atomic.Int64
		_ [56]byte
	}
}

func (c *inflightCounter) add(key uint64, n int64) {
	c.c[(key*0x9e3779b97f4a7c15)>>60%counterShards].v.Add(n)
}

// zero says whether no request is in flight.
func (c *inflightCounter) zero() bool {
	for i := range c.c {
		if c.c[i].v.Load() != 0 {
			return false
		}
	}
	return true
}

func (a *Array) checkIO(n int, off int64) error {
	if off%a.block != 0 || int64(n)%a.block != 0 {
		return ErrAlignment
	}
	return checkRange(off, int64(n), a.size)
}

// ReadAt reads len(p) bytes at off. off and len(p) must be multiples of
// BlockSize.
func (a *Array) ReadAt(p []byte, off int64) (int, error) {
	if err := a.enter(uint64(off >> 20)); err != nil {
		return 0, err
	}
	defer a.leave(uint64(off >> 20))
	if err := a.checkIO(len(p), off); err != nil { // the size read once admitted: a change suspends I/O
		return 0, err
	}
	a.userIO.add(uint64(off>>20), 1)
	done := int64(0)
	rd := func() error {
		return a.pieces(off, int64(len(p)), func(o, n int64, full bool) error {
			err := a.pers.read(p[o-off:o-off+n], uint64(o>>9))
			if err == nil {
				done = o - off + n
			}
			return err
		})
	}
	var err error
	if j := a.jnl; j != nil && (j.cached() || j.getMode() == JournalWriteBack) {
		err = j.read(p, off, rd)
	} else {
		err = rd()
	}
	return int(done), err
}

// WriteAt writes p at off. off and len(p) must be multiples of BlockSize.
func (a *Array) WriteAt(p []byte, off int64) (int, error) {
	return a.write(p, off, false)
}

// WriteAtFUA writes p at off and returns once it is durable on the
// members (forced unit access).
func (a *Array) WriteAtFUA(p []byte, off int64) (int, error) {
	return a.write(p, off, true)
}

func (a *Array) write(p []byte, off int64, fua bool) (int, error) {
	if a.opts.ReadOnly {
		return 0, ErrReadOnly
	}
	key := uint64(off >> 20)
	if err := a.enter(key); err != nil {
		return 0, err
	}
	defer a.leave(key)
	if err := a.checkIO(len(p), off); err != nil { // the size read once admitted
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	a.userIO.add(key, 1)
	if err := a.writeStart(key); err != nil {
		return 0, err
	}
	defer a.writeEnd(key)
	if a.jnl != nil {
		if (off|int64(len(p)))&(pageSectors<<9-1) != 0 {
			return a.jnl.subPageWrite(p, off, fua)
		}
		return a.jnl.write(p, off, fua, false)
	}
	return a.writePieces(p, off, fua)
}

// writePieces writes p at off through the personality, split at
// full-stripe boundaries, and returns how much was written before an
// error.
func (a *Array) writePieces(p []byte, off int64, fua bool) (int, error) {
	done := int64(0)
	err := a.pieces(off, int64(len(p)), func(o, n int64, full bool) error {
		err := a.pers.write(p[o-off:o-off+n], uint64(o>>9), full, fua)
		if err == nil {
			done = o - off + n
		}
		return err
	})
	a.noteMissed()
	return int(done), err
}

// pieces splits [off, off+n) at full-stripe boundaries: an unaligned head
// up to the next boundary, then the largest multiples of full stripes that
// fit the maximum request size, then the tail.
func (a *Array) pieces(off, n int64, fn func(o, n int64, full bool) error) error {
	var sp splitter
	unit, maxReq := a.unit, a.maxReq
	if rp, ok := a.pers.(*reshapePers); ok && rp.unit > 0 {
		// In a reshape the cuts fall on stripes of both geometries;
		// reshapePers.each splits each side at its own.
		unit, maxReq = rp.unit, max(a.maxReq/rp.unit, 1)*rp.unit
	}
	sp.init(off, n, unit, maxReq)
	for {
		o, l, full, ok := sp.next()
		if !ok {
			return nil
		}
		if err := fn(o, l, full); err != nil {
			return err
		}
	}
}

// splitter yields the pieces of a request; see Array.pieces.
type splitter struct {
	off, end, unit, max int64
}

func (s *splitter) init(off, n, unit, max int64) {
	s.off, s.end, s.unit, s.max = off, off+n, unit, max
	if s.max <= 0 {
		s.max = 1 << 20
	}
}

// next returns the next piece; full reports a whole number of units.
func (s *splitter) next() (off, n int64, full, ok bool) {
	if s.off >= s.end {
		return 0, 0, false, false
	}
	off = s.off
	rem := s.end - s.off
	if s.unit <= 0 {
		n = min(rem, s.max)
	} else if r := off % s.unit; r != 0 {
		n = min(rem, s.unit-r) // head
	} else if rem >= s.unit {
		maxFull := s.max / s.unit * s.unit
		if maxFull < s.unit {
			maxFull = s.unit
		}
		n = min(rem/s.unit*s.unit, maxFull)
		full = true
	} else {
		n = rem // tail
	}
	s.off += n
	return off, n, full, true
}

// Flush makes every completed write durable on every working member.
func (a *Array) Flush() error {
	if err := a.enter(0); err != nil {
		return err
	}
	defer a.leave(0)
	return a.flushMembers()
}

func (a *Array) flushMembers() error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, m := range a.all {
		if !m.writable() {
			continue
		}
		wg.Add(1)
		go func(m *member) {
			defer wg.Done()
			if err := m.dev.Flush(); err != nil {
				a.memberError(m, err, true)
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}(m)
	}
	wg.Wait()
	if a.failed.Load() {
		return errors.Join(append(errs, ErrFailed)...)
	}
	return nil
}

// Discard tells the array a range is unused. Like md, raid4/5/6 discard
// only whole stripes (and only when every member discards to zeroes, so
// parity stays valid); other levels pass the discard to the members.
func (a *Array) Discard(off, n int64) error {
	return a.zeroOrDiscard(off, n, true)
}

// WriteZeroes zeroes a range.
func (a *Array) WriteZeroes(off, n int64) error {
	return a.zeroOrDiscard(off, n, false)
}

func (a *Array) zeroOrDiscard(off, n int64, discard bool) error {
	if a.opts.ReadOnly {
		return ErrReadOnly
	}
	if off%a.block != 0 || n%a.block != 0 {
		return ErrAlignment
	}
	key := uint64(off >> 20)
	if err := a.enter(key); err != nil {
		return err
	}
	defer a.leave(key)
	if err := checkRange(off, n, a.size); err != nil { // the size read once admitted
		return err
	}
	if n == 0 {
		return nil
	}
	a.userIO.add(key, 1)
	if err := a.writeStart(key); err != nil {
		return err
	}
	defer a.writeEnd(key)
	if a.jnl != nil {
		return a.jnl.zero(off, n, discard)
	}
	return a.pieces(off, n, func(o, l int64, full bool) error {
		return a.pers.zero(uint64(o>>9), uint64(l>>9), full, discard)
	})
}

// Close marks the array clean (when it was written), flushes, and closes
// the member devices.
func (a *Array) Close() error {
	a.closeMu.Lock()
	defer a.closeMu.Unlock()
	if a.isClosed {
		return ErrClosed
	}
	a.isClosed = true
	a.closed.Store(true)
	// md_do_sync interrupted: the running action stops and records where.
	a.stopSync(true)
	for !a.inflight.zero() {
		select {
		case <-a.drained:
		case <-time.After(10 * time.Millisecond):
		}
	}
	if a.cancel != nil {
		a.cancel()
		<-a.done
	}
	var errs []error
	if !a.opts.ReadOnly {
		if a.jnl != nil {
			if err := a.jnl.close(); err != nil {
				errs = append(errs, err)
			}
		}
		if err := a.stopWrites(); err != nil {
			errs = append(errs, err)
		}
		if err := a.flushMembers(); err != nil {
			errs = append(errs, err)
		}
	}
	a.cfgMu.RLock()
	removed := make(map[int]bool)
	for _, m := range a.all {
		if m.removed.Load() {
			removed[m.index] = true
		}
	}
	for i, d := range a.devs {
		if removed[i] {
			continue // closed by RemoveDevice
		}
		if err := d.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	a.cfgMu.RUnlock()
	return errors.Join(errs...)
}

// Tick runs one step of the background work (safe mode, bitmap daemon)
// for arrays opened with NoDaemon.
func (a *Array) Tick() error {
	now := a.opts.Clock()
	a.safeMode(now)
	return a.tickBitmap(now)
}

func (a *Array) daemon(ctx context.Context) {
	defer close(a.done)
	period := a.opts.SafeModeDelay / 4
	if period <= 0 || period > 250*time.Millisecond {
		period = 250 * time.Millisecond
	}
	if period < 5*time.Millisecond {
		period = 5 * time.Millisecond
	}
	t := time.NewTicker(period)
	defer t.Stop()
	var bmErrLogged bool
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := a.opts.Clock()
		a.safeMode(now)
		if err := a.tickBitmap(now); err != nil && !bmErrLogged {
			a.opts.Logf("md: bitmap daemon: %v", err)
			bmErrLogged = true
		}
		if !a.opts.NoAutoSync && !a.sc.disabled.Load() {
			a.checkRecovery()
		}
	}
}

// memberError handles an I/O error of m. A write error (or a flush error)
// makes the member faulty; the superblocks of the others record it. It
// returns false when the array can no longer serve I/O.
func (a *Array) memberError(m *member, err error, write bool) bool {
	if !write {
		// Read errors are handled by the callers (reconstruct and
		// rewrite); a read error that cannot be repaired becomes a write
		// error there.
		return true
	}
	return a.failMember(m, err)
}

// Fail marks the member in role faulty, like `mdadm --fail`.
func (a *Array) Fail(role int) error {
	var m *member
	if role >= 0 && role < a.n {
		a.cfgMu.RLock()
		m = a.roles[role]
		a.cfgMu.RUnlock()
	}
	if m == nil {
		return fmt.Errorf("engine: no member in role %d", role)
	}
	if a.opts.ReadOnly {
		return ErrReadOnly
	}
	a.failMember(m, errors.New("marked faulty"))
	return nil
}

// failMember marks m faulty and records it in the other superblocks
// before returning (md blocks the failing request until the superblocks
// say so). md refuses to fail the last working copy of raid1/raid10 data:
// then m stays in sync and the caller gets the error instead. It returns
// false when the array can no longer serve I/O.
func (a *Array) failMember(m *member, cause error) bool {
	a.markFaulty(m, cause)
	a.recordFailures()

	return !a.failed.Load()
}

// markFaulty is md_error: it decides, in memory only, that m failed. It
// reports whether m is faulty now.
func (a *Array) markFaulty(m *member, cause error) bool {
	a.failMu.Lock()
	defer a.failMu.Unlock()
	st := m.State()
	if st == Faulty {
		return true
	}
	if a.multipath() {
		return a.mpError(m)
	}
	if !a.redundant() {
		if !a.failed.Load() {
			// raid0_error/linear_error: MD_BROKEN, said once.
			a.logLines(failureLines(a.level, a.mdName(), a.devName(m), 0, a.n, false, true))
		}
		a.setFailed(fmt.Sprintf("%v has no redundancy and device %d failed: %v", a.level, m.index, cause))
		return false
	}
	if st == InSync && (a.level == layout.RAID1 || a.level == layout.RAID10) {
		m.state.Store(uint32(Faulty))
		ok := a.checkRedundancy() == nil
		m.state.Store(uint32(st))
		if !ok {
			a.logLines(failureLines(a.level, a.mdName(), a.devName(m), a.degraded(), a.n, true, false))
			return false
		}
	}
	m.state.Store(uint32(Faulty))
	rerr := a.checkRedundancy()
	a.logLines(failureLines(a.level, a.mdName(), a.devName(m), a.degraded(), a.n, false, rerr != nil))
	if rerr != nil {
		a.setFailed(fmt.Sprintf("device %d (role %d) failed: %v; %v", m.index, m.role, cause, rerr))
	}
	a.meta.devsDirty.Store(true)
	if a.jnl != nil {
		// r5c_update_on_rdev_error: a data member or the journal device
		a.jnl.onMemberFailed()
	}
	return true
}

// recordFailures writes the superblocks when members failed since they
// were last written (MD_SB_CHANGE_DEVS).
func (a *Array) recordFailures() {
	if a.opts.ReadOnly || !a.meta.devsDirty.Load() {
		return
	}
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	if !a.meta.devsDirty.Load() {
		return
	}
	a.meta.changeDevs = true
	if err := a.updateSuperLocked(true); err != nil {
		a.opts.Logf("md: superblock update after failure: %v", err)
	}
}

// openBitmap reads the bitmap of the freshest in-sync member and starts the
// write-intent runtime.
func (a *Array) openBitmap(as *assembly) error {
	var src *member
	for _, m := range a.roles {
		if m != nil && m.State() == InSync && (src == nil || m.ls.sb.Events > src.ls.sb.Events) {
			src = m
		}
	}
	if src == nil {
		return fmt.Errorf("%w: no in-sync member to read the bitmap from", ErrFailed)
	}
	h, area, err := readBitmap(src.dev, src.ls)
	if err != nil {
		return fmt.Errorf("engine: bitmap: %w", err)
	}
	a.hasBM = true
	rt, err := a.newWIB(h, area[bitmap.HeaderSize:])
	if err != nil {
		return err
	}
	a.bm = rt
	return nil
}
