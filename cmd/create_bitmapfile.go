package cmd

// create --bitmap=FILE: mdadm 4.2's CreateBitmap, before any superblock
// is written.

import (
	"os"
	"path/filepath"

	"mdtool/bitmap"
	"mdtool/internal/mdadm/plan"
)

// createBitmapFile writes the bitmap file of a new array (header, every
// bit set) and returns its absolute path for the daemon. An existing file
// is refused without --force, as mdadm refuses it; a failed write removes
// the file.
func createBitmapFile(env *Env, path string, force bool, h *bitmap.Header) (string, error) {
	if _, err := os.Lstat(path); err == nil && !force {
		return "", exitf(ExitFailure, "bitmap file %s already exists, use --force to overwrite", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", exitf(ExitFailure, "failed to open bitmap file %s: %v", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return "", exitf(ExitFailure, "failed to open bitmap file %s: %s", path, strerror(err))
	}
	_, err = f.Write(plan.NewBitmapFile(*h))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path) // possibly corrupted, as mdadm says
		return "", exitf(ExitFailure, "failed to write bitmap file %s: %s", path, strerror(err))
	}
	return abs, nil
}
