package cmd

// assemble --bitmap=FILE and the bitmap= word of an ARRAY line: the
// array's write-intent bitmap is that file (mdadm's SET_BITMAP_FILE
// before RUN_ARRAY).

import (
	"fmt"
	"os"
	"path/filepath"

	"mdtool/internal/daemon"
)

// checkAssembleBitmap is mdadm.c's parsing of --bitmap in assemble mode:
// "internal" and "clustered" are noted and ignored; a file must open
// read-write (exit 2 otherwise). The path is made absolute for the
// daemon.
func checkAssembleBitmap(env *Env, o *assembleOptions, given bool) error {
	switch {
	case !given:
		return nil
	case o.bitmapFile == "internal" || o.bitmapFile == "clustered":
		fmt.Fprintf(env.Stderr, "mdtool: no need to specify --bitmap when assembling arrays with internal or clustered bitmap\n")
		o.bitmapFile = ""
		return nil
	case o.bitmapFile == "":
		return exitMsg(ExitUsage, "cannot open bitmap file : No such file or directory")
	}
	f, err := os.OpenFile(o.bitmapFile, os.O_RDWR, 0)
	if err != nil {
		return exitf(ExitUsage, "cannot open bitmap file %s: %s", o.bitmapFile, strerror(err))
	}
	f.Close()
	if p, err := filepath.Abs(o.bitmapFile); err == nil {
		o.bitmapFile = p
	}
	return nil
}

// bitmapFileFor gives the daemon the job's bitmap file: --bitmap, else
// the ARRAY line's bitmap= (which must open: "Could not open bitmap file").
func (as *assembler) bitmapFileFor(j assembleJob, lc *daemon.LaunchConfig) bool {
	switch {
	case as.o.bitmapFile != "":
		lc.BitmapFile = as.o.bitmapFile
	case j.ident.bitmapFile != "":
		f, err := os.OpenFile(j.ident.bitmapFile, os.O_RDWR, 0)
		if err != nil {
			as.errf("Could not open bitmap file %s\n", j.ident.bitmapFile)
			return false
		}
		f.Close()
		lc.BitmapFile = j.ident.bitmapFile
		if p, err := filepath.Abs(lc.BitmapFile); err == nil {
			lc.BitmapFile = p
		}
	}
	return true
}
