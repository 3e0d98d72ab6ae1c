package cmd

// grow --bitmap=FILE: Grow_addbitmap's bitmap-file branch. mdtool writes
// the file as mdadm's CreateBitmap does (the array's UUID, its size, every
// bit set) and the daemon takes it as md takes SET_BITMAP_FILE.

import (
	"context"

	"mdtool/bitmap"
	"mdtool/internal/daemon"
	"mdtool/internal/mdadm/plan"
	"mdtool/superblock"
)

func growBitmapFile(env *Env, o *growOptions, md string) error {
	var chunk uint64
	if o.bitmapChunk != "" {
		var err error
		if chunk, err = plan.ParseBitmapChunk(o.bitmapChunk); err != nil {
			return planError(err)
		}
	}
	if o.size != "" || o.raidDevices != 0 || o.chunk != "" || o.layout != "" || len(o.add) > 0 {
		return exitf(ExitFailure, "--bitmap changes cannot be used with other geometry changes in --grow mode")
	}
	delay, err := parseDelay(o.delay)
	if err != nil {
		return err
	}
	if delay == 0 {
		delay = plan.DefaultBitmapDelay
	}
	dev := escName(md)
	cl, err := bitmapDial(o, md)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), growTimeout)
	defer cancel()
	st, err := cl.Status(ctx)
	if err != nil {
		return exitf(ExitFailure, "cannot get array status for %s", dev)
	}
	switch {
	case st.BitmapFile != "":
		return exitf(ExitFailure, "%s already has a bitmap (%s)", dev, st.BitmapFile)
	case st.Bitmap:
		return exitf(ExitFailure, "bitmap already present on %s", dev)
	case st.Level <= 0:
		level := "of this array"
		if n, ok := mapNum(persTable, st.Level); ok {
			level = n
		}
		return exitf(ExitFailure, "Bitmaps not meaningful with level %s", level)
	}
	h, err := growFileHeader(st, chunk, delay)
	if err != nil {
		return exitf(ExitFailure, "cannot find UUID for array!")
	}
	abs, err := createBitmapFile(env, o.bitmap, o.force, h)
	if err != nil {
		return err
	}
	if _, err := cl.Call(ctx, daemon.Request{Op: daemon.OpGrowBitmap, Bitmap: abs}); err != nil {
		if code, _ := opFailure(err); code == daemon.CodeBusy {
			return exitMsg(ExitFailure, "Cannot add bitmap while array is resyncing or reshaping etc.\nmdtool: Cannot set bitmap file for "+dev+": Device or resource busy")
		}
		return exitf(ExitFailure, "Cannot set bitmap file for %s: %s", dev, errText(err))
	}
	return nil
}

// growFileHeader is the header CreateBitmap gets from Grow_addbitmap:
// array.size in sectors (times raid_disks / copies for raid10), the
// UUID of the superblock (uuid_from_super).
func growFileHeader(st *daemon.Status, chunk uint64, delay uint32) (*bitmap.Header, error) {
	size := st.ComponentSectors / 2 * 2
	if st.Level == 10 {
		copies := uint64(st.Layout&255) * uint64((st.Layout>>8)&255)
		if copies == 0 {
			copies = 1
		}
		size = size * uint64(st.RaidDisks) / copies
	}
	h := &bitmap.Header{Magic: bitmap.Magic, Version: bitmap.Version, DaemonSleep: delay, SyncSize: size,
		ChunkSize: uint32(plan.FileBitmapChunk(size, chunk))}
	if len(st.Superblock090) > 0 {
		sb, err := superblock.Parse090(st.Superblock090)
		if err != nil {
			return nil, err
		}
		h.UUID = sb.BitmapUUID090()
		return h, nil
	}
	sb, err := superblock.Parse(st.Superblock)
	if err != nil {
		return nil, err
	}
	h.UUID = sb.SetUUID
	return h, nil
}
