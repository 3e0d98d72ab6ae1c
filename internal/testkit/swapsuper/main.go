// Command swapsuper is the translated mdadm tests' stand-in for mdadm
// 4.2's tests helper swap_super: it turns over the byte order of the 0.90
// superblock of one device (a block device or an image file) in place,
// as superblock.Swap090 describes. The tests build it static
// (CGO_ENABLED=0) so that it runs in the oracle VM as well.
//
//	swapsuper DEVICE
package main

import (
	"fmt"
	"io"
	"os"

	"mdtool/superblock"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "Usage: swap_super device")
		os.Exit(1)
	}
	if err := swap(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func swap(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// the size of a block device or of a file alike
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if size < superblock.MinDevBytes090 {
		return fmt.Errorf("%s: too small for a 0.90 superblock", path)
	}
	off := int64(superblock.Offset090(uint64(size)))
	b := make([]byte, superblock.Size090)
	if _, err := f.ReadAt(b, off); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	s, err := superblock.Swap090(b)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(s, off); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return f.Sync()
}
