// Package member does the metadata I/O on one array member (a block device
// or a regular image file): finding and reading its md superblock and
// bitmap the way mdadm does, and writing planned metadata durably.
package member

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"mdtool/bitmap"
	"mdtool/internal/nbdclient"
	"mdtool/ioctl"
	"mdtool/superblock"
)

// Member is one opened member device or image file, or an export on an
// NBD server (Path an nbd://, nbds:// or nbd+unix:// URI; File nil).
type Member struct {
	Path string
	File *os.File // nil for a remote member
	Geom ioctl.Geometry
	rw   store
}

// store is what metadata I/O needs: the file, or the NBD client.
type store interface {
	io.ReaderAt
	io.WriterAt
	Close() error
}

// remote is an NBD client as a store: Sync is its Flush.
type remote struct{ *nbdclient.Client }

func (r remote) Sync() error { return r.Flush() }

// Remote reports whether the member is on an NBD server.
func (m *Member) Remote() bool { return m.File == nil }

// DialTimeout bounds connecting to a remote member's server.
const DialTimeout = 30 * time.Second

// Mode says how a member is opened.
type Mode int

const (
	ReadOnly  Mode = iota
	ReadWrite      // read-write, shared
	Exclusive      // read-write, O_EXCL on block devices, flock on image files: busy members are refused
)

// Open opens a member device or image file through ioctl.OpenMember: it
// never blocks on a FIFO and refuses anything that is not a block device
// or a regular file.
func Open(path string, mode Mode) (*Member, error) {
	if nbdclient.IsURI(path) {
		return openRemote(path)
	}
	var o ioctl.OpenOptions
	switch mode {
	case Exclusive:
		o = ioctl.OpenOptions{Write: true, Exclusive: true}
	case ReadWrite:
		o = ioctl.OpenOptions{Write: true}
	}
	f, err := ioctl.OpenMember(path, o)
	if err != nil {
		return nil, err
	}
	g, err := ioctl.GetGeometry(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Member{Path: path, File: f, Geom: g, rw: f}, nil
}

// openRemote connects to the export a URI names. Exclusive mode takes no
// lock: nothing locks a remote export.
func openRemote(uri string) (*Member, error) {
	u, err := nbdclient.ParseURI(uri)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), DialTimeout)
	defer cancel()
	c, err := nbdclient.Dial(ctx, u, nbdclient.Options{})
	if err != nil {
		return nil, err
	}
	min, pref, _ := c.BlockSizes()
	g := ioctl.Geometry{Size: uint64(c.Size()), LogicalBlockSize: max(min, 512), PhysicalBlockSize: max(pref, min, 512)}
	return &Member{Path: uri, Geom: g, rw: remote{c}}, nil
}

// Close closes the member.
func (m *Member) Close() error { return m.rw.Close() }

// Sectors is the member size in 512-byte sectors.
func (m *Member) Sectors() uint64 { return m.Geom.Size >> 9 }

// ReadAt reads len(p) bytes at byte offset off. Short reads past the end
// of the member are an error.
func (m *Member) ReadAt(p []byte, off int64) (int, error) {
	n, err := m.rw.ReadAt(p, off)
	if err == io.EOF && n == len(p) {
		err = nil
	}
	return n, err
}

// V1 is a v1.x superblock found on a member (superblock.FindV1).
type V1 = superblock.Found

// ErrNoSuperblock means no md superblock was found.
var ErrNoSuperblock = superblock.ErrNotFound

// LoadV1 finds a v1.x superblock on the member; see FindV1.
func (m *Member) LoadV1(minor int) (*V1, error) {
	v, err := FindV1(m, m.Sectors(), minor)
	if err != nil && !errors.Is(err, ErrNoSuperblock) {
		return nil, fmt.Errorf("%s: %w", m.Path, err)
	}
	return v, err
}

// FindV1 finds a v1.x superblock as mdadm's load_super1 does; see
// superblock.FindV1.
func FindV1(r io.ReaderAt, sectors uint64, minor int) (*V1, error) {
	return superblock.FindV1(r, sectors, minor)
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
		if _, err := m.rw.WriteAt(data, off); err != nil {
			return fmt.Errorf("%s: write at %d: %w", m.Path, off, err)
		}
	}
	if err := m.sync(); err != nil {
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

// sync makes the writes durable (fsync, or an NBD flush).
func (m *Member) sync() error {
	if m.File != nil {
		return m.File.Sync()
	}
	return m.rw.(remote).Sync()
}

// ReadAt reads like a file: a read that reaches past the end of the
// export returns what is there and io.EOF.
func (r remote) ReadAt(p []byte, off int64) (int, error) {
	size := r.Size()
	if off >= size {
		return 0, io.EOF
	}
	if rest := size - off; int64(len(p)) > rest {
		n, err := r.Client.ReadAt(p[:rest], off)
		if err == nil {
			err = io.EOF
		}
		return n, err
	}
	return r.Client.ReadAt(p, off)
}
