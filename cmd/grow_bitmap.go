package cmd

import (
	"context"
	"errors"
	"strings"

	"mdtool/internal/daemon"
	"mdtool/internal/mdadm/plan"
)

// growBitmap adds, removes or re-chunks the write-intent bitmap
// (mdadm's Grow_addbitmap). Internal bitmaps only: the daemon writes the
// bitmap mdadm would write and then loads it as md's bitmap/location
// does; --bitmap=none removes it. A bitmap that is present is refused
// ("bitmap already present"), so a new chunk size takes --bitmap=none
// first, as with mdadm.
func growBitmap(env *Env, o *growOptions, md string) error {
	switch {
	case o.bitmap == "internal" || o.bitmap == "none":
	case plan.IsBitmapFile(o.bitmap):
		return growBitmapFile(env, o, md) // grow_bitmapfile.go
	case o.bitmap == "clustered" || strings.Contains(o.bitmap, "/"):
		return exitf(ExitFailure, "only internal bitmaps are supported, not '%s'", escName(o.bitmap))
	default:
		return exitf(ExitUsage, "bitmap file must contain a '/', or be 'internal', or be 'clustered', or 'none'\n       not '%s'", escName(o.bitmap))
	}
	delay, _ := parseDelay(o.delay) // checked with the command line (grow.go)
	var chunk uint64
	if o.bitmapChunk != "" {
		var err error
		if chunk, err = plan.ParseBitmapChunk(o.bitmapChunk); err != nil {
			return planError(err)
		}
	}
	if len(o.add) > 0 && o.raidDevices == 0 && o.level == "" {
		return exitf(ExitFailure, "--add cannot be used with other geometry changes in --grow mode")
	}
	if o.size != "" || o.raidDevices != 0 || o.chunk != "" || o.layout != "" {
		return exitf(ExitFailure, "--bitmap changes cannot be used with other geometry changes in --grow mode")
	}
	dev := escName(md)
	cl, err := bitmapDial(o, md)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), growTimeout)
	defer cancel()
	_, err = cl.Call(ctx, daemon.Request{Op: daemon.OpGrowBitmap, Bitmap: o.bitmap, BitmapChunk: chunk, BitmapDelay: delay})
	if err == nil {
		return nil
	}
	return growBitmapText(ctx, cl, dev, o.bitmap, err)
}

// bitmapDial connects to the daemon serving md for a bitmap change; an
// array nobody serves is mdadm's "error opening MD" (open_mddev).
func bitmapDial(o *growOptions, md string) (*daemon.Client, error) {
	name, err := daemon.ArrayName(md)
	if err == nil {
		var cl *daemon.Client
		if cl, err = daemon.Dial(o.runDir, name); err == nil {
			return cl, nil
		}
	}
	return nil, exitf(ExitFailure, "error opening %s: No such file or directory", escName(md))
}

// growBitmapText words a refused or failed bitmap change as mdadm 4.2's
// Grow_addbitmap does.
func growBitmapText(ctx context.Context, cl *daemon.Client, dev, what string, err error) error {
	var oe *daemon.OpError
	code := daemon.CodeFailed
	if errors.As(err, &oe) {
		code = oe.Code
	}
	switch code {
	case daemon.CodeBitmapPresent:
		if st, serr := cl.Status(ctx); serr == nil && st.BitmapFile != "" {
			return exitf(ExitFailure, "%s already has a bitmap (%s)", dev, st.BitmapFile) // GET_BITMAP_FILE first
		}
		return exitf(ExitFailure, "bitmap already present on %s", dev)
	case daemon.CodeNoBitmap:
		return exitf(ExitFailure, "no bitmap found on %s", dev)
	case daemon.CodeBitmapLevel:
		level := "of this array"
		if st, serr := cl.Status(ctx); serr == nil {
			if n, ok := mapNum(persTable, st.Level); ok {
				level = n
			}
		}
		return exitf(ExitFailure, "Bitmaps not meaningful with level %s", level)
	case daemon.CodeBitmapChunk:
		return exitf(ExitFailure, "failed to create internal bitmap - chunksize problem.")
	case daemon.CodeNoSuperblock:
		return exitf(ExitFailure, "failed to load super-block.")
	case daemon.CodeBusy:
		if what == "none" {
			return exitf(ExitFailure, "failed to remove internal bitmap.")
		}
		return exitMsg(ExitFailure, "Cannot add bitmap while array is resyncing or reshaping etc.\nmdtool: failed to set internal bitmap.")
	}
	if what == "none" {
		return exitf(ExitFailure, "failed to remove internal bitmap: %s", errText(err))
	}
	return exitf(ExitFailure, "failed to set internal bitmap: %s", errText(err))
}

func errText(err error) string {
	_, reason := opFailure(err)
	return reason
}
