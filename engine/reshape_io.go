package engine

// ioScaler is an action whose units are not counted in member sectors:
// ioSectors gives the sync I/O (md's io_sectors, what sync_speed and
// sync_speed_min/max measure) of a unit of n sectors of its sync space.
type ioScaler interface {
	ioSectors(n uint64) uint64
}

// syncIO is the sync I/O of a unit of n sectors of act.
func syncIO(act syncAction, n uint64) uint64 {
	if s, ok := act.(ioScaler); ok {
		return s.ioSectors(n)
	}
	return n
}

// ioSectors: md counts a reshape in sectors per device (raid5.c
// reshape_request works on reshape_progress over the new data disks and
// returns per-device sectors), so sync_speed_min/max limit a reshape as
// they limit a resync of the same members.
func (ra *reshapeAction) ioSectors(n uint64) uint64 {
	return max(n/uint64(ra.a.rs.geo.New.DataDisks()), 1)
}
