package engine

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"mdtool/ioctl"
)

// FileOptions say how OpenFile opens a member.
type FileOptions struct {
	ReadOnly bool
	// Exclusive opens block devices with O_EXCL (refused while mounted or
	// in use by the kernel md driver) and locks image files with flock
	// (refused while another mdtool command or daemon holds them); see
	// ioctl.OpenMember.
	Exclusive bool
	// Buffered turns O_DIRECT off for block devices. Regular files are
	// always opened buffered (pread/pwrite + fdatasync).
	Buffered bool
	// RemoteTimeout is the longest a request may stall because a member
	// on an NBD server (an nbd://, nbds:// or nbd+unix:// URI) stopped
	// answering (0: nbdclient.DefaultTimeout): the member is failed when
	// it leaves a request unanswered for MemberDeadline(RemoteTimeout).
	// Exclusive does not apply to such members: nothing locks a remote
	// export.
	RemoteTimeout time.Duration
}

// FileDevice is an image file or a block device. Block devices are opened
// with O_DIRECT: buffers that are not aligned in memory go through an
// aligned bounce buffer; offsets and lengths must be multiples of the
// logical block size.
type FileDevice struct {
	f      *os.File
	fd     int
	path   string
	block  bool
	direct bool
	geom   DeviceGeometry
}

// OpenFile opens an image file or a block device as a member device.
// Geometry comes from ioctl.GetGeometry (so ioctl geometry overrides
// apply, e.g. a 4 KiB logical block size on an image file).
func OpenFile(path string, o FileOptions) (*FileDevice, error) {
	f, err := ioctl.OpenMember(path, ioctl.OpenOptions{Write: !o.ReadOnly, Exclusive: o.Exclusive, Direct: !o.Buffered})
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	block := st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0
	direct := block && !o.Buffered
	g, err := ioctl.GetGeometry(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	d := &FileDevice{f: f, fd: int(f.Fd()), path: path, block: block, direct: direct}
	d.geom = DeviceGeometry{
		Size:          int64(g.Size),
		LogicalBlock:  g.LogicalBlockSize,
		PhysicalBlock: g.PhysicalBlockSize,
		IOMin:         g.IOMin,
		IOOpt:         g.IOOpt,
		DiscardZeroes: !block,
	}
	if d.geom.LogicalBlock < 512 {
		d.geom.LogicalBlock = 512
	}
	return d, nil
}

// Path returns the path the device was opened from.
func (d *FileDevice) Path() string { return d.path }

// Geometry returns the device geometry.
func (d *FileDevice) Geometry() DeviceGeometry { return d.geom }

// File returns the underlying file.
func (d *FileDevice) File() *os.File { return d.f }

func (d *FileDevice) aligned(p []byte) bool {
	return !d.direct || addrOf(p)&uintptr(d.geom.LogicalBlock-1) == 0
}

func (d *FileDevice) checkIO(p []byte, off int64) error {
	if err := checkRange(off, int64(len(p)), d.geom.Size); err != nil {
		return err
	}
	lb := int64(d.geom.LogicalBlock)
	if off%lb != 0 || int64(len(p))%lb != 0 {
		return ErrAlignment
	}
	return nil
}

// ReadAt reads with pread.
func (d *FileDevice) ReadAt(p []byte, off int64) (int, error) {
	if err := d.checkIO(p, off); err != nil {
		return 0, err
	}
	if d.aligned(p) {
		n, err := preadFull(d.fd, p, off)
		return n, d.endError(err, off, len(p))
	}
	done := 0
	for done < len(p) {
		b := getBuf(min(len(p)-done, 1<<20))
		n, err := preadFull(d.fd, b.b, off+int64(done))
		copy(p[done:], b.b[:n])
		putBuf(b)
		done += n
		if err != nil {
			return done, d.endError(err, off, len(p))
		}
	}
	return done, nil
}

// CurrentSize is the device's size now: the file's (which a truncate
// changes while it is served) or the block device's.
func (d *FileDevice) CurrentSize() (int64, error) {
	if d.block {
		size, err := ioctl.BlockDeviceSize(d.fd)
		if err != nil {
			return 0, &os.PathError{Op: "ioctl(BLKGETSIZE64)", Path: d.path, Err: err}
		}
		return int64(size), nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return 0, &os.PathError{Op: "fstat", Path: d.path, Err: err}
	}
	return st.Size, nil
}

// endError marks err as ErrBeyondEnd when [off, off+n) is no longer
// inside the device (a short read at its end, ENXIO/EINVAL/ENOSPC of a
// block device past its end).
func (d *FileDevice) endError(err error, off int64, n int) error {
	if err == nil || errors.Is(err, ErrBeyondEnd) {
		return err
	}
	if size, serr := d.CurrentSize(); serr == nil && off+int64(n) > size {
		return fmt.Errorf("%s: %w (%d bytes at %d, device size now %d): %v", d.path, ErrBeyondEnd, n, off, size, err)
	}
	return err
}

// checkEnd refuses, on a regular file, a write or zeroing that would
// reach past the file's current end: pwrite would extend a truncated
// member again with holes that read back as zeroes.
func (d *FileDevice) checkEnd(off, n int64) error {
	if d.block {
		return nil
	}
	size, err := d.CurrentSize()
	if err != nil {
		return err
	}
	if off+n > size {
		return fmt.Errorf("%s: %w (%d bytes at %d, file size now %d)", d.path, ErrBeyondEnd, n, off, size)
	}
	return nil
}

// WriteAt writes with pwrite.
func (d *FileDevice) WriteAt(p []byte, off int64) (int, error) {
	return d.write(p, off, 0)
}

// WriteAtFUA writes with RWF_DSYNC (REQ_FUA on O_DIRECT block devices).
func (d *FileDevice) WriteAtFUA(p []byte, off int64) (int, error) {
	return d.write(p, off, unix.RWF_DSYNC)
}

func (d *FileDevice) write(p []byte, off int64, flags int) (int, error) {
	if err := d.checkIO(p, off); err != nil {
		return 0, err
	}
	if err := d.checkEnd(off, int64(len(p))); err != nil {
		return 0, err
	}
	if d.aligned(p) {
		n, err := pwriteFull(d.fd, p, off, flags)
		return n, d.endError(err, off, len(p))
	}
	done := 0
	for done < len(p) {
		b := getBuf(min(len(p)-done, 1<<20))
		copy(b.b, p[done:])
		n, err := pwriteFull(d.fd, b.b, off+int64(done), flags)
		putBuf(b)
		done += n
		if err != nil {
			return done, d.endError(err, off, len(p))
		}
	}
	return done, nil
}

func preadFull(fd int, p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) {
		n, err := unix.Pread(fd, p[done:], off+int64(done))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, &os.PathError{Op: "pread", Path: "", Err: err}
		}
		if n == 0 {
			return done, fmt.Errorf("pread at %d: %w", off+int64(done), ErrBeyondEnd)
		}
		done += n
	}
	return done, nil
}

func pwriteFull(fd int, p []byte, off int64, flags int) (int, error) {
	done := 0
	iov := [][]byte{nil}
	for done < len(p) {
		var n int
		var err error
		if flags == 0 {
			n, err = unix.Pwrite(fd, p[done:], off+int64(done))
		} else {
			iov[0] = p[done:]
			n, err = unix.Pwritev2(fd, iov, off+int64(done), flags)
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, &os.PathError{Op: "pwrite", Path: "", Err: err}
		}
		if n == 0 {
			return done, errors.New("pwrite: no progress")
		}
		done += n
	}
	return done, nil
}

// Flush calls fdatasync (a cache flush on block devices).
func (d *FileDevice) Flush() error {
	for {
		err := unix.Fdatasync(d.fd)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "fdatasync", Path: d.path, Err: err}
		}
		return nil
	}
}

// Discard punches a hole in a regular file or issues BLKDISCARD.
func (d *FileDevice) Discard(off, n int64) error {
	if err := checkRange(off, n, d.geom.Size); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return ioctl.Discard(d.f, uint64(off), uint64(n))
}

// WriteZeroes zeroes a range: BLKZEROOUT on block devices, fallocate on
// files, or written zeroes when neither works.
func (d *FileDevice) WriteZeroes(off, n int64) error {
	if err := checkRange(off, n, d.geom.Size); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if err := d.checkEnd(off, n); err != nil {
		return err
	}
	if ioctl.ZeroOut(d.f, uint64(off), uint64(n)) == nil {
		return nil
	}
	return writeZeroBuf(d, off, n)
}

// Close closes the file.
func (d *FileDevice) Close() error { return d.f.Close() }
