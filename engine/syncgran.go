package engine

import "mdtool/engine/layout"

// syncGranularity is how far one sync_request call of the personality
// moves md_do_sync's position (Linux 6.1), which decides where md records
// progress (cpRule): raid4/5/6 sync one stripe of STRIPE_SECTORS (8) at a
// time; raid1 and raid10 a window of RESYNC_PAGES (64 KiB, 128 sectors).
func (a *Array) syncGranularity() uint64 {
	switch a.level {
	case layout.RAID4, layout.RAID5, layout.RAID6:
		return 8
	case layout.RAID1, layout.RAID10:
		return 128
	}
	return 1
}
