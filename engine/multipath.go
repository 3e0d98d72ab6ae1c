package engine

import (
	"fmt"

	"mdtool/engine/layout"
)

// md's multipath personality (md-multipath.c, Linux 6.1; removed in
// 6.8): every member is a path to the same disk. Requests go to the
// first in-sync path, and a path whose I/O fails is disabled and the
// request retried on the next one (multipath_end_request, multipathd).
// Unlike raid1, md keeps no write-intent state for it (no md_write_start:
// the array never goes active, no bitmap, no resync), a path added to
// the array is in sync at once (multipath_add_disk) and md refuses to
// disable the last path.
//
// md's bookkeeping differs from the other levels in three ways that show
// in the superblocks:
//   - super_1_load ignores dev_number: analyze_sbs numbers the members
//     (desc_nr) and gives them their slots in the order of md's device
//     list, which holds the device added last first;
//   - super_1_sync never writes dev_number: each member keeps the one it
//     was loaded with;
//   - md_update_sb writes one superblock only, the first member's of the
//     list (none when that member is faulty).
//
// On two paths to one disk both superblock areas are the same sectors,
// so what md writes there (and -E shows) is the list head's superblock.

// assembleMultipath gives every current member its slot as analyze_sbs
// does: in list order, the device added last (the last given) first;
// beyond raid_disks they are spares. Members more than one event behind
// the freshest are left out ("kicking non-fresh").
func assembleMultipath(as *assembly) {
	ref := as.ref.sb
	as.roleDev = make([]int, int(ref.RaidDisks))
	for r := range as.roleDev {
		as.roleDev[r] = -1
	}
	desc := 0
	for i := len(as.supers) - 1; i >= 0; i-- {
		ls := as.supers[i]
		if ls.err != nil {
			continue
		}
		if ls != as.ref && ls.sb.Events+1 < ref.Events {
			as.stale = append(as.stale, i)
			continue
		}
		ls.devNumber, ls.keepDev = ls.sb.DevNumber, true
		ls.sb.DevNumber = uint32(desc)
		if desc < len(as.roleDev) {
			as.roleDev[desc] = i
		} else {
			as.spares = append(as.spares, i)
		}
		desc++
	}
}

// multipath reports whether the array runs md's multipath personality.
func (a *Array) multipath() bool { return a.level == layout.Multipath }

// mpListHead is the member md's device list starts with: the one added
// last that is still in the array, else the first one assembled.
func (a *Array) mpListHead() *member {
	for i := len(a.all) - 1; i >= a.assembled; i-- {
		if !a.all[i].removed.Load() {
			return a.all[i]
		}
	}
	for _, m := range a.all[:a.assembled] {
		if !m.removed.Load() {
			return m
		}
	}
	return nil
}

// mpError is multipath_error: the path is disabled unless it is the last
// one (md leaves that one active: "it's all we have"). It reports
// whether m is faulty now.
func (a *Array) mpError(m *member) bool {
	if a.n-a.degraded() <= 1 {
		a.opts.Logf("multipath: only one IO path left and IO error.")
		return false
	}
	m.state.Store(uint32(Faulty))
	a.opts.Logf("multipath: IO failure on %s, disabling IO path.", a.devName(m))
	a.opts.Logf("multipath: Operation continuing on %d IO paths.", a.n-a.degraded())
	a.meta.devsDirty.Store(true)
	return true
}

// mpCheckRecovery is md_check_recovery for multipath: faulty paths leave
// their slots, and spares take the free slots in sync at once
// (remove_and_add_spares with multipath_add_disk; no sync_request, so
// nothing runs after). Taking slots is one superblock update.
func (a *Array) mpCheckRecovery() {
	if a.closed.Load() {
		return
	}
	a.freeFaultySlots()
	a.placeSpares(func(holes []int, spares []*member) int {
		n := 0
		// the list's order: the spare added last first
		for i := len(spares) - 1; i >= 0 && n < len(holes); i-- {
			m, r := spares[i], holes[n]
			if old := a.roles[r]; old != nil {
				old.role = -1 // hot_remove_disk: the faulty path leaves its slot
			}
			m.role = r
			m.state.Store(uint32(InSync))
			a.roles[r] = m
			n++
		}
		return n
	})
}

// multipathPers serves I/O through the first in-sync path
// (multipath_map), retrying on the next one when a path fails.
type multipathPers struct{ a *Array }

// path is multipath_map's choice: the in-sync member of the lowest slot.
func (mp *multipathPers) path() *member {
	a := mp.a
	a.cfgMu.RLock()
	defer a.cfgMu.RUnlock()
	for _, m := range a.roles {
		if m != nil && m.State() == InSync && !m.removed.Load() {
			return m
		}
	}
	return nil
}

// do runs op on a path until it succeeds or no path is left.
func (mp *multipathPers) do(sector uint64, op func(m *member, off int64) error) error {
	a := mp.a
	for {
		m := mp.path()
		if m == nil {
			a.opts.Logf("multipath_map(): no more operational IO paths?")
			return fmt.Errorf("%w: no operational IO path", ErrFailed)
		}
		err := op(m, m.dataOff+int64(sector)*512)
		if err == nil {
			return nil
		}
		if !a.mpError(m) {
			return err // the last path: md retries it; the caller gets the error
		}
		a.recordFailures()
		a.opts.Logf("multipath: %s: rescheduling sector %d", a.devName(m), sector)
	}
}

func (mp *multipathPers) read(p []byte, sector uint64) error {
	return mp.do(sector, func(m *member, off int64) error {
		_, err := m.dev.ReadAt(p, off)
		return err
	})
}

func (mp *multipathPers) write(p []byte, sector uint64, full, fua bool) error {
	return mp.do(sector, func(m *member, off int64) error {
		var err error
		if f, ok := m.dev.(FUAWriter); ok && fua {
			_, err = f.WriteAtFUA(p, off)
		} else {
			_, err = m.dev.WriteAt(p, off)
		}
		return err
	})
}

func (mp *multipathPers) zero(sector, count uint64, full, discard bool) error {
	if discard {
		// advisory: a path that cannot discard keeps its data
		if m := mp.path(); m != nil {
			_ = m.dev.Discard(m.dataOff+int64(sector)*512, int64(count)*512)
		}
		return nil
	}
	return mp.do(sector, func(m *member, off int64) error {
		return writeZeroes(m.dev, off, int64(count)*512)
	})
}

// mpDevNumber is the dev_number md keeps in m's superblock: the one m
// was loaded with (assembleMultipath), else (a path added to the running
// array) the one written for it, which is its desc_nr too.
func mpDevNumber(m *member) uint32 {
	if m.ls.keepDev {
		return m.ls.devNumber
	}
	return m.ls.sb.DevNumber
}
