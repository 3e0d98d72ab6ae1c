package engine

// freeFaultySlots is the first half of md 6.1's remove_and_add_spares, as
// md_check_recovery runs it when no sync runs: every faulty member still
// in its slot is taken out of it (hot_remove_disk, raid_disk = -1; it
// stays in the array as faulty until --remove), and that sets
// MD_SB_CHANGE_DEVS: one more superblock update (events+1) after the
// one that recorded the failure. When a spare takes a free slot in the
// same pass, that spare's update is the one (the engine's spare
// activation writes it), so no update of its own here.
func (a *Array) freeFaultySlots() {
	if a.opts.ReadOnly || a.syncBusy() {
		return
	}
	a.cfgMu.Lock()
	n := 0
	for _, m := range a.all {
		if m.role >= 0 && !m.slotFreed && !m.removed.Load() && m.State() == Faulty {
			m.slotFreed = true
			n++
		}
	}
	holes, spares := a.sparePlanLocked()
	a.cfgMu.Unlock()
	if n == 0 || (len(holes) > 0 && len(spares) > 0) {
		return
	}
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	a.meta.changeDevs = true
	if err := a.updateSuperLocked(true); err != nil {
		a.opts.Logf("md: superblock update: %v", err)
	}
}
