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

// growBitmapFile is OpGrowBitmap with a bitmap file (absolute path) that
// the caller has just written (mdadm's CreateBitmap in Grow_addbitmap):
// the daemon opens it and gives it to the engine, as SET_BITMAP_FILE
// gives it to md.
func (s *Service) growBitmapFile(path string) error {
	a := s.cfg.Array
	if a.HasBitmap() {
		return Errorf(CodeBitmapPresent, "bitmap already present")
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return Errorf(CodeInvalid, "cannot open bitmap file %s: %v", path, err)
	}
	if err := a.AddBitmapFile(f); err != nil {
		f.Close()
		return growBitmapError(err)
	}
	s.cfg.Logf("md: bitmap file %s added", path)
	return nil
}
