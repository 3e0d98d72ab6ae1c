package engine

import (
	"errors"
	"fmt"
	"io"

	"mdtool/superblock"
)

// findV1 finds a v1.x superblock on a device of the given size (sectors)
// the way mdadm's load_super1 does: minor < 0 tries 1.0, 1.1 and 1.2 and
// keeps the latest ctime. A candidate counts when its magic and major
// version are right and its super_offset is where it was found; a bad
// checksum does not disqualify it (what Parse objected to is kept in err).
// It mirrors internal/mdadm/member.FindV1, which the array may not import
// (the layering test in internal/layering forbids it).
func findV1(r io.ReaderAt, sectors uint64, minor int) (*loadedSuper, error) {
	var best *loadedSuper
	for mi := 0; mi <= 2; mi++ {
		if minor >= 0 && mi != minor {
			continue
		}
		ls, err := readV1(r, sectors, mi)
		if errors.Is(err, ErrNoSuperblock) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if best == nil || uint64(best.sb.CTime) < uint64(ls.sb.CTime) {
			best = ls
		}
	}
	if best == nil {
		return nil, ErrNoSuperblock
	}
	return best, nil
}

// readV1 reads the v1.<minor> superblock candidate.
func readV1(r io.ReaderAt, sectors uint64, minor int) (*loadedSuper, error) {
	off, err := superblock.Offset(minor, sectors)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, superblock.AreaSize)
	n, err := r.ReadAt(raw, int64(off)*512)
	if err != nil && !(err == io.EOF && n == len(raw)) {
		return nil, fmt.Errorf("cannot read superblock: %w", err)
	}
	sb, perr := superblock.Parse(raw)
	if sb == nil || sb.MajorVersion != 1 || sb.SuperOffset != off {
		return nil, ErrNoSuperblock
	}
	return &loadedSuper{minor: minor, offset: off, raw: raw, sb: sb, err: perr}, nil
}
