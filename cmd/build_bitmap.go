package cmd

// build --bitmap=FILE (mdadm 4.2's -B -b FILE [-d N] [--bitmap-chunk]):
// Build() opens the file read-write and, when that fails, creates it
// with CreateBitmap (no UUID, the smallest member's size as sync_size,
// every bit set) before SET_BITMAP_FILE; an existing file is used as it
// is, its bits saying what needs a resync.

import (
	"errors"
	"os"
	"path/filepath"

	"mdtool/bitmap"
	"mdtool/engine"
	"mdtool/internal/mdadm/plan"
	"mdtool/internal/nbdclient"
	"mdtool/ioctl"
	"mdtool/superblock"
)

// buildBitmapArgs checks --bitmap, --bitmap-chunk and --delay as mdadm.c
// parses them (exit 2), and the BUILD mode's refusal of an internal
// bitmap; o.bitmap "none" becomes "".
func (o *buildOptions) buildBitmapArgs() error {
	switch b := o.bitmap; {
	case b == "" || b == "internal" || b == "clustered":
	case b == "none":
		o.bitmap = ""
	case !plan.IsBitmapFile(b):
		return exitf(ExitUsage, "bitmap file must contain a '/', or be 'internal', or be 'clustered', or 'none'\n       not '%s'", b)
	}
	if o.bitmapChunk != "" {
		var err error
		if o.bmChunk, err = plan.ParseBitmapChunk(o.bitmapChunk); err != nil {
			return planError(err)
		}
	}
	var err error
	o.bmDelay, err = parseDelay(o.delay)
	return err
}

// buildBitmapRefusal is what mdadm refuses of a bitmap once the devices
// are counted: 'internal' (mdadm.c's BUILD case) and a level without
// redundancy (Build()).
func (o *buildOptions) buildBitmapRefusal(lv int) error {
	switch {
	case o.bitmap == "internal" || o.bitmap == "clustered":
		return exitMsg(ExitFailure, "'internal' and 'clustered' bitmaps not supported with --build")
	case o.bitmap != "" && lv <= superblock.LevelRAID0:
		name, ok := plan.MapNum(plan.PersTable, lv)
		if !ok {
			name = "given"
		}
		return exitf(ExitFailure, "bitmaps not meaningful with level %s", name)
	}
	return nil
}

// buildOpenMembers opens each member as Build() does before anything is
// added (O_EXCL; mdtool: ioctl.OpenMember's exclusive open) and closes it
// again, and returns the smallest member's size in bytes and the first
// NBD URI among them (the daemon dials those; they are not sized here).
func buildOpenMembers(members []string) (uint64, string, error) {
	var size uint64
	uri := ""
	for _, m := range members {
		if nbdclient.IsURI(m) {
			if uri == "" {
				uri = m
			}
			continue
		}
		f, err := ioctl.OpenMember(m, ioctl.OpenOptions{Exclusive: true})
		if err != nil {
			return 0, "", exitf(ExitFailure, "Cannot open %s: %s", m, openReason(err))
		}
		g, err := ioctl.GetGeometry(f)
		f.Close()
		if err != nil {
			return 0, "", exitf(ExitFailure, "Cannot open %s: %s", m, openReason(err))
		}
		if size == 0 || g.Size < size {
			size = g.Size
		}
	}
	return size, uri, nil
}

// buildBitmapFile opens the bitmap file read-write or, when it cannot,
// writes it as Build()'s CreateBitmap call does, over the smallest
// member (size bytes >> 9, "wrong for RAID10" as mdadm says), with
// --write-behind. A member that is an NBD URI is not sized here: the file
// is then not created ("Cannot open", as a path that does not exist). It
// returns the file's absolute path.
func (o *buildOptions) buildBitmapFile(size uint64, uri string) (string, error) {
	path := o.bitmap
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", exitf(ExitFailure, "%s cannot be opened.", path)
	}
	if f, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
		f.Close()
		return abs, nil
	}
	if uri != "" {
		return "", exitf(ExitFailure, "Cannot open %s: %s", uri, openReason(os.ErrNotExist))
	}
	// Build.c's size for CreateBitmap: --size in KiB when given (taken
	// as bytes: its "FIXME"), lowered to any member's byte size below it
	if o.sizeKiB != 0 {
		size = min(size, o.sizeKiB)
	}
	sectors := size >> 9
	h := &bitmap.Header{Magic: bitmap.Magic, Version: bitmap.Version, SyncSize: sectors,
		ChunkSize: uint32(plan.FileBitmapChunk(sectors, o.bmChunk)), DaemonSleep: plan.DefaultBitmapDelay,
		WriteBehind: o.bmBehind}
	if o.bmDelay != 0 {
		h.DaemonSleep = o.bmDelay
	}
	if _, err := createBitmapFile(nil, path, true, h); err != nil {
		return "", err
	}
	return abs, nil
}

// buildBitmapRunError is the errno md 6.1's RUN_ARRAY returns when it
// cannot load the bitmap file ("" when err is no such refusal):
// md_bitmap_read_sb refuses a header it cannot take (EINVAL),
// md_bitmap_init_from_disk a file without a bit for every chunk of the
// array (ENOSPC).
func buildBitmapRunError(err error) string {
	for _, e := range []error{bitmap.ErrBadMagic, bitmap.ErrShort, bitmap.ErrVersion, bitmap.ErrChunkSize,
		bitmap.ErrDaemonSleep, bitmap.ErrWriteBehind, bitmap.ErrLockless} {
		if errors.Is(err, e) {
			return "Invalid argument"
		}
	}
	if errors.Is(err, engine.ErrBitmapFileShort) {
		return "No space left on device"
	}
	return ""
}
