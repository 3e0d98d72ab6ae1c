package engine

import "mdtool/bitmap"

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
