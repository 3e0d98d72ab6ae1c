package daemon

import (
	"os"

	"mdtool/engine"
)

// openBitmapFile opens lc's bitmap file (mdadm --assemble --bitmap=FILE)
// for the engine. The file stays open for the life of the daemon, as
// the kernel holds the file it was given with SET_BITMAP_FILE.
func openBitmapFile(lc *LaunchConfig, opts *engine.Options) error {
	if lc.BitmapFile == "" {
		return nil
	}
	f, err := os.OpenFile(lc.BitmapFile, os.O_RDWR, 0)
	if err != nil {
		return Errorf(CodeInvalid, "cannot open bitmap file %s: %v", lc.BitmapFile, err)
	}
	opts.BitmapFile = f
	return nil
}
