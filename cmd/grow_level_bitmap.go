package cmd

import (
	"context"
	"time"

	"mdtool/internal/daemon"
	"mdtool/superblock"
)

// dropBitmapForRAID0 is mdadm 4.2's first step of every --grow --level=0
// (Grow_reshape): an internal bitmap is removed before anything else is
// checked (raid0 cannot keep one: md's raid0_takeover refuses an array
// with a bitmap), and stays removed if the level change then fails.
// Every other level change and reshape keeps the bitmap as md does.
func dropBitmapForRAID0(cl *daemon.Client, st *daemon.Status, newLevel int) error {
	if newLevel != superblock.LevelRAID0 || !st.Bitmap {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := cl.Call(ctx, daemon.Request{Op: daemon.OpGrowBitmap, Bitmap: "none"}); err != nil {
		return exitf(ExitFailure, "failed to remove internal bitmap.")
	}
	st.Bitmap = false
	return nil
}

// levelBusyBitmap is impose_level's second line after an EBUSY from md's
// level_store when the array has a bitmap.
func levelBusyBitmap(st *daemon.Status) string {
	if !st.Bitmap {
		return ""
	}
	return "\n       Bitmap must be removed before level can be changed"
}
