// Package member does the metadata I/O on one array member (a block device
// or a regular image file): finding and reading its md superblock and
// bitmap the way mdadm does, and writing planned metadata durably.
package member

import (
	"errors"
	"fmt"
	"io"
	"os"

	"mdtool/bitmap"
	"mdtool/ioctl"
	"mdtool/superblock"
)

// Member is one opened member device or image file.
type Member struct {
	Path string
	File *os.File
	Geom ioctl.Geometry
}

// Mode says how a member is opened.
type Mode int

const (
	ReadOnly  Mode = iota
	ReadWrite      // read-write, shared
	Exclusive      // read-write with O_EXCL on block devices: busy devices are refused
)

// Open opens a member device or image file.
func Open(path string, mode Mode) (*Member, error) {
	var f *os.File
	var err error
	switch mode {
	case Exclusive:
		f, err = ioctl.OpenExclusive(path, true)
	case ReadWrite:
		f, err = os.OpenFile(path, os.O_RDWR, 0)
	default:
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, err
	}
	g, err := ioctl.GetGeometry(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Member{Path: path, File: f, Geom: g}, nil
}

// Close closes the member.
func (m *Member) Close() error { return m.File.Close() }

// Sectors is the member size in 512-byte sectors.
func (m *Member) Sectors() uint64 { return m.Geom.Size >> 9 }

// ReadAt reads len(p) bytes at byte offset off. Short reads past the end
// of the member are an error.
func (m *Member) ReadAt(p []byte, off int64) (int, error) {
	n, err := m.File.ReadAt(p, off)
	if err == io.EOF && n == len(p) {
		err = nil
	}
	return n, err
}

// V1 is a v1.x superblock found on a member.
type V1 struct {
	Minor  int    // 0, 1 or 2 (metadata 1.0, 1.1, 1.2)
	Offset uint64 // sector of the superblock
	Raw    []byte // the 4 KiB superblock area as read
	SB     *superblock.Superblock
	// Err holds what superblock.Validate objected to (bad checksum, bad
	// padding, data that does not fit the device, ...). mdadm still loads
	// such a superblock (examine prints it); the kernel refuses the
	// member, and so must every user that would run it or write it.
	Err error
}

// ErrNoSuperblock means no md superblock was found.
var ErrNoSuperblock = errors.New("no md superblock detected")

// LoadV1 finds a v1.x superblock on the member; see FindV1.
func (m *Member) LoadV1(minor int) (*V1, error) {
	v, err := FindV1(m, m.Sectors(), minor)
	if err != nil && !errors.Is(err, ErrNoSuperblock) {
		return nil, fmt.Errorf("%s: %w", m.Path, err)
	}
	return v, err
}

// FindV1 finds a v1.x superblock on a device of the given size (sectors)
// as mdadm's load_super1 does. minor -1 tries 1.0, 1.1 and 1.2 and picks
// the one with the latest ctime. A candidate counts when its magic and
// major version are right and its super_offset is where it was found; the
// checksum is not required (what superblock.Validate objected to is in
// V1.Err).
func FindV1(r io.ReaderAt, sectors uint64, minor int) (*V1, error) {
	var best *V1
	for mi := 0; mi <= 2; mi++ {
		if minor >= 0 && mi != minor {
			continue
		}
		v, err := loadV1(r, sectors, mi)
		if errors.Is(err, ErrNoSuperblock) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if best == nil || uint64(best.SB.CTime) < uint64(v.SB.CTime) {
			best = v
		}
	}
	if best == nil {
		return nil, ErrNoSuperblock
	}
	return best, nil
}

func loadV1(r io.ReaderAt, sectors uint64, minor int) (*V1, error) {
	off, err := superblock.Offset(minor, sectors)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, superblock.AreaSize)
	n, err := r.ReadAt(raw, int64(off)*512)
	if err != nil && !(err == io.EOF && n == len(raw)) {
		return nil, fmt.Errorf("cannot read superblock: %w", err)
	}
	sb, perr := superblock.Validate(raw, sectors)
	if sb == nil || sb.MajorVersion != 1 || sb.SuperOffset != off {
		return nil, ErrNoSuperblock
	}
	return &V1{Minor: minor, Offset: off, Raw: raw, SB: sb, Err: perr}, nil
}

// LoadV090 reads a 0.90 superblock, if there is one.
func (m *Member) LoadV090() (*superblock.SuperblockV090, []byte, error) {
	off := superblock.Offset090(m.Geom.Size)
	if m.Geom.Size < superblock.MinDevBytes090 {
		return nil, nil, ErrNoSuperblock
	}
	raw := make([]byte, 4096)
	if _, err := m.ReadAt(raw, int64(off)); err != nil {
		return nil, nil, fmt.Errorf("%s: cannot read superblock: %w", m.Path, err)
	}
	sb, err := superblock.Parse090(raw)
	if sb == nil {
		return nil, nil, ErrNoSuperblock
	}
	return sb, raw, err
}

// BitmapOffset returns the absolute byte offset of the internal bitmap of
// a v1 superblock, or false when it has none.
func (v *V1) BitmapOffset() (int64, bool) {
	if v.SB.FeatureMap&superblock.FeatureBitmapOffset == 0 {
		return 0, false
	}
	return (int64(v.Offset) + int64(v.SB.BitmapOffset)) * 512, true
}

// ReadBitmap reads the bitmap header and its bit array (header.Bytes()
// bytes in all, capped at maxBytes) at byte offset off.
func (m *Member) ReadBitmap(off int64, maxBytes int) (*bitmap.Header, []byte, error) {
	head := make([]byte, bitmap.HeaderSize)
	if _, err := m.ReadAt(head, off); err != nil {
		return nil, nil, fmt.Errorf("%s: cannot read bitmap: %w", m.Path, err)
	}
	h, perr := bitmap.Parse(head)
	if h == nil {
		return nil, nil, perr
	}
	n := int64(h.Bytes())
	if maxBytes > 0 && n > int64(maxBytes) {
		n = int64(maxBytes)
	}
	if end := int64(m.Geom.Size); off+n > end {
		n = end - off
	}
	buf := make([]byte, n)
	if _, err := m.ReadAt(buf, off); err != nil {
		return h, nil, fmt.Errorf("%s: cannot read bitmap: %w", m.Path, err)
	}
	return h, buf, perr
}

// Write is one planned metadata write.
type Write struct {
	Offset int64
	Data   []byte
}

// WriteAll writes every write in order and then syncs the member. Writes
// that are not aligned to the logical block size are done as
// read-modify-write of whole logical blocks, as mdadm's awrite does for
// 4 KiB-sector devices.
func (m *Member) WriteAll(ws []Write) error {
	lbs := int64(m.Geom.LogicalBlockSize)
	if lbs < 512 {
		lbs = 512
	}
	for _, w := range ws {
		off, data := w.Offset, w.Data
		if off%lbs != 0 || int64(len(data))%lbs != 0 {
			start := off / lbs * lbs
			end := (off + int64(len(data)) + lbs - 1) / lbs * lbs
			buf := make([]byte, end-start)
			if _, err := m.ReadAt(buf, start); err != nil {
				return fmt.Errorf("%s: read at %d: %w", m.Path, start, err)
			}
			copy(buf[off-start:], data)
			off, data = start, buf
		}
		if _, err := m.File.WriteAt(data, off); err != nil {
			return fmt.Errorf("%s: write at %d: %w", m.Path, off, err)
		}
	}
	if err := m.File.Sync(); err != nil {
		return fmt.Errorf("%s: sync: %w", m.Path, err)
	}
	return nil
}

// FindSuperblock returns the byte offset and the size mdadm's Kill()
// zeroes for the superblock mdadm's guess_super would pick on this member:
// a v1.x one (512 bytes: a zeroed superblock with max_dev 0) or a 0.90 one
// (4 KiB). ErrNoSuperblock when there is none.
func (m *Member) FindSuperblock() (off int64, size int, err error) {
	v1, err := m.LoadV1(-1)
	if err == nil {
		return int64(v1.Offset) * 512, 512, nil
	}
	if !errors.Is(err, ErrNoSuperblock) {
		return 0, 0, err
	}
	if _, _, err := m.LoadV090(); !errors.Is(err, ErrNoSuperblock) {
		return int64(superblock.Offset090(m.Geom.Size)), 4096, nil
	}
	return 0, 0, ErrNoSuperblock
}

// EraseSuperblocks zeroes md superblocks until none is left, like mdadm's
// Kill() loop, and returns how many it erased.
func (m *Member) EraseSuperblocks() (int, error) {
	for n := 0; ; n++ {
		off, size, err := m.FindSuperblock()
		if errors.Is(err, ErrNoSuperblock) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if n >= 8 {
			return n, fmt.Errorf("%s: md superblock keeps reappearing at byte %d", m.Path, off)
		}
		if err := m.WriteAll([]Write{{Offset: off, Data: make([]byte, size)}}); err != nil {
			return n, err
		}
	}
}
