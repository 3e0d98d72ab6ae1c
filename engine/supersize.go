package engine

import (
	"mdtool/bitmap"
	"mdtool/engine/layout"
)

// superDevSectors is mddev->dev_sectors as super_1_sync writes it into
// sb->size: raid10_run replaces it with calc_sectors' result (the far
// and near copies rounded to whole chunks), raid5_run rounds it down to
// the chunk; other levels keep the superblock's own size.
func (a *Array) superDevSectors(size uint64) uint64 {
	switch a.level {
	case layout.RAID4, layout.RAID5, layout.RAID6, layout.RAID10:
		if a.geo != nil {
			return a.geo.DevSectors(0)
		}
	}
	return size
}

// bitmapSyncSize is md_bitmap_create's size: the kernel sizes the bitmap
// by resync_max_sectors (the array size for raid10, the component size
// otherwise), not by the header's sync_size, and md_bitmap_update_sb
// writes that back into the header. mdadm's raid10 sync_size can be
// larger (it does not round the far copies to chunks). A size whose bits
// the area read does not hold keeps the header's.
func (a *Array) bitmapSyncSize(h bitmap.Header, bitsLen int) bitmap.Header {
	if a.geo == nil {
		return h
	}
	total, _ := a.syncSize()
	n := h
	n.SyncSize = total
	if total == 0 || n.Chunks() > uint64(bitsLen)*8 {
		return h
	}
	return n
}
