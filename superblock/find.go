package superblock

import (
	"errors"
	"fmt"
	"io"
)

// ErrNotFound means no v1.x md superblock was found on a device.
var ErrNotFound = errors.New("no md superblock detected")

// Found is a v1.x superblock found on a device by FindV1.
type Found struct {
	Minor  int    // 0, 1 or 2 (metadata 1.0, 1.1, 1.2)
	Offset uint64 // sector of the superblock
	Raw    []byte // the 4 KiB superblock area as read
	SB     *Superblock
	// Err holds what Validate objected to (bad checksum, bad padding, data
	// that does not fit the device, ...). mdadm still loads such a
	// superblock (examine prints it); the kernel refuses the member, and
	// so must every user that would run it or write it.
	Err error
}

// FindV1 finds a v1.x superblock on a device of the given size (sectors)
// as mdadm's load_super1 does: minor -1 tries 1.0, 1.1 and 1.2 and keeps
// the one with the latest ctime. A candidate counts when its magic and
// major version are right and its super_offset is where it was found; the
// checksum is not required (what Validate objected to is in Found.Err).
// It only reads through r.
func FindV1(r io.ReaderAt, sectors uint64, minor int) (*Found, error) {
	var best *Found
	for mi := 0; mi <= 2; mi++ {
		if minor >= 0 && mi != minor {
			continue
		}
		f, err := readV1(r, sectors, mi)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if best == nil || uint64(best.SB.CTime) < uint64(f.SB.CTime) {
			best = f
		}
	}
	if best == nil {
		return nil, ErrNotFound
	}
	return best, nil
}

func readV1(r io.ReaderAt, sectors uint64, minor int) (*Found, error) {
	off, err := Offset(minor, sectors)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, AreaSize)
	n, err := r.ReadAt(raw, int64(off)*512)
	if err != nil && !(err == io.EOF && n == len(raw)) {
		return nil, fmt.Errorf("cannot read superblock: %w", err)
	}
	sb, verr := Validate(raw, sectors)
	if sb == nil || sb.MajorVersion != 1 || sb.SuperOffset != off {
		return nil, ErrNotFound
	}
	return &Found{Minor: minor, Offset: off, Raw: raw, SB: sb, Err: verr}, nil
}

// BitmapOffset returns the absolute byte offset of the internal bitmap,
// or false when the superblock has none.
func (f *Found) BitmapOffset() (int64, bool) {
	if f.SB.FeatureMap&FeatureBitmapOffset == 0 {
		return 0, false
	}
	return (int64(f.Offset) + int64(f.SB.BitmapOffset)) * 512, true
}
