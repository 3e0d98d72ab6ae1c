package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"mdtool/engine/layout"
)

// Hot replacement (md's want_replacement, mdadm --replace): a spare is
// rebuilt as the replacement of an active member while that member keeps
// working. Every write to the member's data area also goes to the
// replacement (md writes both), the replacement is filled by copying the
// member under the stripe or region locks, and when it is complete it
// takes over the role and the old member becomes faulty. The replacement
// carries MD_FEATURE_REPLACEMENT and its recovery_offset in its superblock
// meanwhile.
//
// An interrupted replacement (idle, frozen, Close) records its
// recovery_offset and is resumed from there, also after the next Open.

// teeDevice mirrors the writes to a member's data area onto its
// replacement.
type teeDevice struct {
	Device
	lo, hi  int64 // the member's data area, bytes
	repl    *member
	dead    atomic.Bool
	onError func(err error)
}

func (t *teeDevice) mirror(off, n int64, fn func(d Device, off int64) error) {
	if t.dead.Load() || off+n <= t.lo || off >= t.hi {
		return
	}
	if off < t.lo || off+n > t.hi {
		return // straddles the data area: not a data write
	}
	if err := fn(t.repl.dev, off-t.lo+t.repl.dataOff); err != nil && !t.dead.Swap(true) {
		t.onError(err)
	}
}

func (t *teeDevice) WriteAt(p []byte, off int64) (int, error) {
	n, err := t.Device.WriteAt(p, off)
	if err == nil {
		t.mirror(off, int64(len(p)), func(d Device, o int64) error { _, e := d.WriteAt(p, o); return e })
	}
	return n, err
}

func (t *teeDevice) WriteAtFUA(p []byte, off int64) (int, error) {
	var n int
	var err error
	if f, ok := t.Device.(FUAWriter); ok {
		n, err = f.WriteAtFUA(p, off)
	} else if n, err = t.Device.WriteAt(p, off); err == nil {
		err = t.Device.Flush()
	}
	if err == nil {
		t.mirror(off, int64(len(p)), func(d Device, o int64) error { return writeDurable(d, p, o) })
	}
	return n, err
}

func (t *teeDevice) WriteZeroes(off, n int64) error {
	err := writeZeroes(t.Device, off, n)
	if err == nil {
		t.mirror(off, n, func(d Device, o int64) error { return writeZeroes(d, o, n) })
	}
	return err
}

func (t *teeDevice) Discard(off, n int64) error {
	err := t.Device.Discard(off, n)
	if err == nil {
		t.mirror(off, n, func(d Device, o int64) error { return d.Discard(o, n) })
	}
	return err
}

func (t *teeDevice) Flush() error {
	err := t.Device.Flush()
	if !t.dead.Load() {
		if ferr := t.repl.dev.Flush(); ferr != nil && !t.dead.Swap(true) {
			t.onError(ferr)
		}
	}
	return err
}

// Close is never called through the tee (the array closes its devices).
func (t *teeDevice) Close() error { return nil }

// Replace asks for the active member in role to be replaced while it
// keeps working (md's want_replacement, mdadm --replace): a spare (the
// device index with, or any spare when with is -1) is rebuilt as its
// replacement; when that completes, the old member becomes faulty.
func (a *Array) Replace(role, with int) error {
	if a.closed.Load() {
		return ErrClosed
	}
	if a.opts.ReadOnly {
		return ErrReadOnly
	}
	if !a.redundant() {
		return fmt.Errorf("%w: %v has no redundancy to replace a member with", ErrUnsupported, a.level)
	}
	if role < 0 || role >= a.n {
		return fmt.Errorf("engine: no role %d", role)
	}
	if a.reshaping() {
		return fmt.Errorf("%w: replace during a reshape", ErrUnsupported)
	}
	a.cfgMu.RLock()
	old := a.roles[role]
	// md's remove_and_add_spares offers the spares in its rdev list's
	// order, the device bound last first (see takeSparesInKernelOrder):
	// without --with, the spare added last becomes the replacement.
	var sp *member
	for i := len(a.all) - 1; i >= 0; i-- {
		if m := a.all[i]; m.role < 0 && !m.removed.Load() && m.State() == Spare && (with < 0 || m.index == with) {
			sp = m
			break
		}
	}
	a.cfgMu.RUnlock()
	if old == nil || old.removed.Load() || old.State() != InSync {
		return fmt.Errorf("%w: role %d has no in-sync member to replace", ErrBusy, role)
	}
	if _, ok := old.dev.(*teeDevice); ok {
		return fmt.Errorf("%w: role %d is being replaced already", ErrBusy, role)
	}
	if sp == nil {
		return fmt.Errorf("%w: no spare to replace role %d with", ErrBusy, role)
	}
	if a.geo.DevSectors(role)*512+uint64(sp.dataOff) > uint64(sp.dev.Geometry().Size) {
		return fmt.Errorf("engine: device %d is too small to replace role %d", sp.index, role)
	}
	ctx, ok := a.claim(context.Background(), ActionRecover)
	if !ok {
		return ErrBusy
	}
	a.startReplace(ctx, old, sp, false, with < 0)
	return nil
}

// startReplace sets up the write mirroring and runs the replacement in
// the claimed sync slot; resume continues a replacement found at Open
// from its recovery_offset. hotAdd: md itself makes the spare the
// replacement (remove_and_add_spares' hot_add_disk, MD_SB_CHANGE_DEVS: the
// superblocks are written, one event); mdadm's --with writes the spare's
// slot instead (slot_store), which writes nothing, and a replacement
// resumed at Open is in its slot already.
func (a *Array) startReplace(ctx context.Context, old, sp *member, resume, hotAdd bool) {
	role := old.role
	tee := &teeDevice{Device: old.dev, lo: old.dataOff, hi: old.dataOff + int64(a.geo.DevSectors(role))*512, repl: sp}
	tee.onError = func(err error) {
		if a.markFaulty(sp, err) {
			go a.recordFailures()
		}
	}
	a.suspend()
	a.meta.mu.Lock()
	a.cfgMu.Lock()
	sp.role = role
	sp.replacement = true
	sp.savedRole = -1
	if !resume {
		sp.recovery.Store(0)
		sp.recCP.Store(0)
	}
	sp.state.Store(uint32(Recovering))
	old.dev = tee
	a.cfgMu.Unlock()
	if hotAdd {
		a.meta.changeDevs = true
		if err := a.updateSuperLocked(true); err != nil {
			a.opts.Logf("md: superblock update: %v", err)
		}
	}
	a.meta.mu.Unlock()
	a.resume()
	a.opts.Logf("md: replacing role %d (device %d) with device %d", role, old.index, sp.index)
	go func() {
		err := a.drive(ctx, &replaceAction{a: a, old: old, sp: sp, tee: tee})
		if err != nil && ctx.Err() == nil {
			a.opts.Logf("md: replacement of role %d failed: %v", role, err)
		}
		a.release(true)
		if err == nil && !a.opts.NoAutoSync {
			a.checkRecovery()
		}
	}()
}

// pendingReplacement finds a replacement found at Open that waits to be
// resumed, and the member it replaces.
func (a *Array) pendingReplacement() (old, sp *member) {
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	for _, m := range a.all {
		if !m.replacement || m.role < 0 || m.removed.Load() || m.State() != Recovering {
			continue
		}
		o := a.roles[m.role]
		if o == nil || o == m || o.State() != InSync {
			continue
		}
		if _, busy := o.dev.(*teeDevice); busy {
			continue
		}
		return o, m
	}
	return nil, nil
}

// replaceAction is a hot replacement (syncAction): old is copied onto sp
// from sp's recovery offset on (replaceUnit), then finish swaps them.
type replaceAction struct {
	wholeRange
	a       *Array
	old, sp *member
	tee     *teeDevice
	role    int
}

func (r *replaceAction) name() string { return ActionRecover }

func (r *replaceAction) prepare() (total, from uint64, ok bool, err error) {
	r.role = r.sp.role
	return r.a.geo.DevSectors(r.role), r.sp.recovery.Load(), true, nil
}

func (r *replaceAction) unit(p, max uint64) (uint64, error) {
	if r.sp.State() != Recovering || r.old.State() != InSync {
		return 0, errors.New("replacement or replaced member failed")
	}
	n, err := r.a.replaceUnit(p, max, r.old, r.sp)
	if err != nil {
		return 0, err
	}
	r.a.sc.written.Add(n)
	return n, nil
}

func (r *replaceAction) checkpoint(uint64, bool) { r.a.recoveryCheckpointOf(r.sp) }

// finish gives old its own device back and, when the copy is complete,
// makes sp the member of the role and old faulty.
func (r *replaceAction) finish(_ uint64, err error) error {
	a, old, sp, role := r.a, r.old, r.sp, r.role
	a.suspend()
	a.meta.mu.Lock()
	complete := err == nil && sp.State() == Recovering && old.State() == InSync
	if complete {
		// md_do_sync ends with MD_SB_CHANGE_DEVS, written while the
		// replaced member is still in sync (it gets this one too).
		a.meta.changeDevs = true
		if uerr := a.updateSuperLocked(true); uerr != nil {
			a.opts.Logf("md: superblock update: %v", uerr)
		}
	}
	a.cfgMu.Lock()
	a.failMu.Lock()
	old.dev = r.tee.Device
	if err == nil && sp.State() == Recovering && old.State() == InSync {
		sp.state.Store(uint32(InSync))
		sp.recovery.Store(0)
		sp.recCP.Store(0)
		sp.replacement = false
		a.roles[role] = sp
		old.state.Store(uint32(Faulty))
		old.role = -1
		a.opts.Logf("md: role %d replaced: device %d in sync, device %d faulty", role, sp.index, old.index)
	} else if sp.State() == Recovering && old.State() == InSync {
		// interrupted (idle, frozen, Close): the replacement keeps its
		// place and records where it got to; it is resumed later (or at
		// the next Open).
		sp.recCP.Store(sp.recovery.Load())
	} else {
		// the replacement failed, or the member it replaces did: it
		// leaves the role (a spare again unless faulty)
		if sp.State() != Faulty {
			sp.state.Store(uint32(Spare))
			sp.recovery.Store(0)
			sp.recCP.Store(0)
		}
		sp.role = -1
		sp.replacement = false
	}
	a.failMu.Unlock()
	a.cfgMu.Unlock()
	// md_reap_sync_thread's md_update_sb(mddev, 1): spare_active made
	// the replaced member faulty.
	a.meta.changeDevs = true
	if uerr := a.updateSuperLocked(true); uerr != nil {
		a.opts.Logf("md: superblock update: %v", uerr)
	}
	if complete && old.State() == Faulty {
		// md_check_recovery's next remove_and_add_spares takes the
		// faulty member out of its slot (the replacement moves down)
		// and sets MD_SB_CHANGE_DEVS: the superblocks are written again.
		a.meta.changeDevs = true
		if uerr := a.updateSuperLocked(true); uerr != nil {
			a.opts.Logf("md: superblock update: %v", uerr)
		}
	}
	a.meta.mu.Unlock()
	a.resume()
	return err
}

func (a *Array) recoveryCheckpointOf(m *member) {
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	if r := m.recovery.Load(); r > m.recCP.Load() {
		m.recCP.Store(r)
		a.sc.checkpoint.Store(r)
		if err := a.updateSuperLocked(false); err != nil {
			a.opts.Logf("md: superblock update: %v", err)
		}
	}
}

// replaceUnit copies member sectors [s, s+n) of old onto sp under the
// lock that user writes of that range take.
func (a *Array) replaceUnit(s, max uint64, old, sp *member) (uint64, error) {
	var n uint64
	var unlock func()
	switch {
	case a.striped != nil:
		c := a.striped.ChunkSectors()
		st := s / c
		n = min(c-s%c, max)
		a.lockStripe(st, 0, c)
		unlock = func() { a.unlockStripe(st, 0, c) }
	case a.level == layout.RAID10:
		c := a.geo.ChunkSectors()
		n = min(c-s%c, 128, max)
		v, ok := a.geo.Unmap(sp.role, s)
		if ok {
			a.lockRegions(v, n)
			unlock = func() { a.unlockRegions(v, n) }
		}
	default:
		n = min(128, max)
		a.lockRegions(s, n)
		unlock = func() { a.unlockRegions(s, n) }
	}
	if unlock != nil {
		defer unlock()
	}
	buf := getBuf(int(n) << 9)
	defer putBuf(buf)
	tee := old.dev.(*teeDevice)
	if _, err := tee.Device.ReadAt(buf.b, old.dataOff+int64(s)<<9); err != nil {
		// md would rebuild the block from the others; keep it simple and
		// give up (the member stays in service).
		return 0, fmt.Errorf("read error on the member being replaced: %w", err)
	}
	if _, err := sp.dev.WriteAt(buf.b, sp.dataOff+int64(s)<<9); err != nil {
		tee.dead.Store(true)
		a.failMember(sp, err)
		return 0, err
	}
	advance(sp, s+n)
	return n, nil
}
