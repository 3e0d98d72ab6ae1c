package engine

import (
	"fmt"
	"sync"

	"mdtool/engine/layout"
	"mdtool/engine/wib"
)

// A reshape or a takeover with an internal write-intent bitmap, as Linux
// 6.1 and mdadm 4.2 do it:
//
//   - raid4/5/6 mark the bitmap by member sector (raid5.c: sh->sector, the
//     stripe's sector on its members, counted from the data offset of the
//     geometry the stripe belongs to). A reshape changes neither
//     dev_sectors nor the bitmap's sync_size, so md keeps the bitmap as it
//     is (no md_bitmap_resize; raid5_resize is the only raid5 caller): the
//     same chunk size, sync_size and offset afterwards. A write on either
//     side of the reshape point sets the bit of its member sectors in its
//     own geometry (the stripedPers of each side does the same), and the
//     stripes the reshape moves set none.
//   - After a crash mid-reshape the next assembly continues the reshape
//     first (md_check_recovery: reshape_position before recovery_cp), and
//     the resync the dirty array needs follows, guided by the bits, in the
//     new geometry.
//   - Moving the data down must not tread on the bitmap: the kernel's
//     super_1_allow_new_offset refuses a new offset below sb_start +
//     bitmap_offset + the bitmap's pages; mdadm 4.2's getinfo_super1 counts
//     the bitmap into space_before (bitmapRoomCheck).
//   - Takeovers keep the bitmap (level_store swaps the personality under
//     the same bitmap), except into raid0: raid0_takeover refuses an array
//     with a bitmap (EBUSY); mdadm 4.2's Grow_reshape removes an internal
//     bitmap before any --level=0 change.

// bitmapPages is the size of the bitmap on a member in 4 KiB pages, the
// kernel's storage.file_pages: the 256-byte header and one bit a chunk.
func (a *Array) bitmapPages() uint64 {
	b, ok := a.bm.(*wib.Bitmap)
	if !ok {
		return 0
	}
	return (256 + (b.Chunks()+7)/8 + 4095) / 4096
}

// bitmapRoomCheck refuses moving the data of 1.1/1.2 members down by
// -off sectors into the bitmap (super_1_allow_new_offset; mdadm's
// space_before counts bitmap_offset + the bitmap rounded up to 4 KiB,
// which lies below the kernel's bound).
func (a *Array) bitmapRoomCheck(off int64) error {
	if !a.hasBM || off >= 0 {
		return nil
	}
	pages := a.bitmapPages()
	for _, m := range a.all {
		if m.removed.Load() || m.State() == Faulty {
			continue
		}
		sb := m.ls.sb
		if sb.DataOffset < sb.SuperOffset || sb.BitmapOffset < 0 {
			continue // 1.0: the bitmap is behind the data
		}
		end := sb.SuperOffset + uint64(sb.BitmapOffset) + pages*8
		if int64(sb.DataOffset)+off < int64(end) {
			return fmt.Errorf("%w (the bitmap ends at sector %d)", ErrNoRoom, end)
		}
	}
	return nil
}

// takeoverBitmapCheck is raid0_takeover's refusal of an array with a
// bitmap (the other takeovers keep it).
func (a *Array) takeoverBitmapCheck(level layout.Level) error {
	if a.hasBM && level == layout.RAID0 {
		return fmt.Errorf("%w: raid0 cannot take over an array with a bitmap", ErrBusy)
	}
	return nil
}

// cfgUnlocker releases a held cfgMu once: early, before the superblocks
// (and the bitmap superblock, whose writer lists the members under
// cfgMu.RLock) are written, or at the deferred call.
type cfgUnlocker struct {
	mu   *sync.RWMutex
	done bool
}

func (a *Array) lockCfg() *cfgUnlocker {
	a.cfgMu.Lock()
	return &cfgUnlocker{mu: &a.cfgMu}
}

func (u *cfgUnlocker) Unlock() {
	if !u.done {
		u.done = true
		u.mu.Unlock()
	}
}
