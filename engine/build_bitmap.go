package engine

import (
	"fmt"
	"os"

	"mdtool/bitmap"
)

// checkBitmapHeader is md_bitmap_read_sb's check of a bitmap against the
// array: its UUID and events, only for an array with superblocks
// (mddev->persistent). The bitmap file of an array without them (mdadm
// --build --bitmap=FILE) is taken as it is: its bits say what needs a
// resync, whatever UUID and events it carries.
func (a *Array) checkBitmapHeader(h *bitmap.Header) error {
	if a.opts.NotPersistent {
		return nil
	}
	return h.CheckFor(a.bitmapUUID(), a.meta.events)
}

// checkBitmapFileSize is md_bitmap_init_from_disk's check of a bitmap
// file: it must hold a bit for every chunk of the array (the chunks md
// counts from resync_max_sectors, whatever the file's sync_size says),
// else the array does not start ("bitmap file too short", ENOSPC). Only
// a file mdadm wrote for a smaller size is short: Build's CreateBitmap
// over the smallest member ("wrong for RAID10", as mdadm says).
func (a *Array) checkBitmapFileSize(f *os.File, h *bitmap.Header) error {
	total, _ := a.syncSize()
	n := *h
	n.SyncSize = total
	need := int64(bitmap.HeaderSize) + int64((n.Chunks()+7)/8)
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() < need {
		return fmt.Errorf("%w: bitmap file too short %d < %d", ErrBitmapFileShort, st.Size(), need)
	}
	return nil
}
