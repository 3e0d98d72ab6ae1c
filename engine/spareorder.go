package engine

import "time"

// spareHoldMax bounds how long deferred adds keep spares from taking
// roles when the add that should end the batch never comes.
const spareHoldMax = 10 * time.Second

// holdSpares keeps spares from taking roles until the last add of a
// batch (or spareHoldMax).
func (a *Array) holdSpares() {
	a.sc.spareHold.Store(a.opts.Clock().Add(spareHoldMax).UnixNano())
}

// sparesHeld reports whether a batch of adds is under way.
func (a *Array) sparesHeld() bool {
	h := a.sc.spareHold.Load()
	return h != 0 && a.opts.Clock().UnixNano() < h
}

// takeSparesInKernelOrder gives free roles to spares as md 6.1's
// remove_and_add_spares does: it walks the rdev list, in which md
// puts every newly bound device first (bind_rdev_to_array's
// list_add_rcu), so the spare added last is offered a role first; each
// spare gets its saved role when that is free (a re-add,
// saved_raid_disk), else the lowest free role (raid1_add_disk,
// raid5_add_disk, raid10_add_disk scan from the first slot). spares is
// in device-index (add) order; spares that already have a role (a
// replacement) are skipped. take gets guided=true for a saved role.
func takeSparesInKernelOrder(spares []*member, holes []int, free map[int]bool, take func(r int, sp *member, guided bool)) {
	for i := len(spares) - 1; i >= 0; i-- {
		sp := spares[i]
		if sp.role >= 0 {
			continue
		}
		if r := sp.savedRole; r >= 0 && free[r] {
			delete(free, r)
			take(r, sp, true)
			continue
		}
		for _, r := range holes {
			if free[r] {
				delete(free, r)
				take(r, sp, false)
				break
			}
		}
	}
}
