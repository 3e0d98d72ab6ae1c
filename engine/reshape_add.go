package engine

import (
	"fmt"

	"mdtool/superblock"
)

// A device added during a reshape (md 6.1's add_new_disk on a running
// array, mdadm 4.2's Manage_add) becomes a spare at once: mdadm copies
// the superblock of an in-sync member, so the new device records the
// reshape too (reshape_position, delta_disks, the new layout and chunk
// and, when the data moves, new_offset: write_init_super1 keeps them),
// and the kernel's super_1_load gives it new_data_offset = data_offset +
// new_offset, which md_update_sb writes back. md_check_recovery does not
// call remove_and_add_spares while reshape_position is set, so the spare
// takes no role until the reshape ends; md_finish_reshape then moves its
// data_offset with the others', and the next md_check_recovery gives it
// a missing role (a recovery) when the array is degraded. The engine
// does the same: the member keeps its new offset (finishReshape moves
// it), pickAction runs the reshape before assignSpares, and the drive
// loop looks for recovery work when the reshape has finished.

// reshapeRoom checks that a device being added during a reshape holds the
// member sectors of the new geometry at its new data offset: sb is the
// superblock about to be written (data_offset, data_size and the copied
// new_offset), need the new geometry's member sectors.
func (a *Array) reshapeRoom(sb *superblock.Superblock, need uint64) error {
	if !a.reshaping() || sb.FeatureMap&superblock.FeatureReshapeActive == 0 {
		return nil
	}
	end := sb.DataOffset + sb.DataSize
	if nd := sb.NewDataOffset(); nd+need > end {
		return fmt.Errorf("engine: device not large enough to join the array (%d sectors of data at the new offset %d, %d needed)",
			end-min(nd, end), nd, need)
	}
	return nil
}

// reAddDuringReshape refuses a bitmap-guided re-add while a reshape runs:
// the reshape's own writes set no bitmap bits (stripedPers.mover), so the
// bitmap does not say what the device missed. mdadm's --add then adds it
// as a new spare, fully recovered if it takes a role after the reshape.
func (a *Array) reAddDuringReshape() error {
	if a.reshaping() {
		return fmt.Errorf("%w: the array is reshaping", ErrNotReAddable)
	}
	return nil
}
