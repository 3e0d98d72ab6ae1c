package export

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// File is a Backend over an open regular file or block device. FUA writes
// use pwritev2(RWF_DSYNC) (write + fdatasync where that is unsupported),
// Flush is fdatasync, Discard and WriteZeroes use fallocate (PUNCH_HOLE,
// ZERO_RANGE) and fall back to writing zeroes where the filesystem has no
// support. File does not own f: closing f is the caller's business.
type File struct {
	f              *os.File
	fd             int
	size           int64
	min, pref, max uint32
	noDSync        atomic.Bool // pwritev2(RWF_DSYNC) unsupported
	noZeroRange    atomic.Bool
	noPunch        atomic.Bool
}

// NewFile returns a File serving f with the given block sizes. The size is
// f's size at the time of the call (for a block device, its end offset),
// rounded down to a multiple of min.
func NewFile(f *os.File, min, preferred, max uint32) (*File, error) {
	if err := CheckBlockSizes(min, preferred, max); err != nil {
		return nil, err
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("export: size of %s: %w", f.Name(), err)
	}
	size -= size % int64(min)
	return &File{f: f, fd: int(f.Fd()), size: size, min: min, pref: preferred, max: max}, nil
}

// Size returns the device size.
func (b *File) Size() int64 { return b.size }

// BlockSizes returns the block sizes given to NewFile.
func (b *File) BlockSizes() (min, preferred, max uint32) { return b.min, b.pref, b.max }

// ReadAt reads from the file.
func (b *File) ReadAt(p []byte, off int64) (int, error) {
	if err := checkRange(off, int64(len(p)), b.size); err != nil {
		return 0, err
	}
	return b.f.ReadAt(p, off)
}

// WriteAt writes to the file.
func (b *File) WriteAt(p []byte, off int64) (int, error) {
	if err := checkRange(off, int64(len(p)), b.size); err != nil {
		return 0, err
	}
	return b.f.WriteAt(p, off)
}

// WriteAtFUA writes to the file and makes the data durable.
func (b *File) WriteAtFUA(p []byte, off int64) (int, error) {
	if err := checkRange(off, int64(len(p)), b.size); err != nil {
		return 0, err
	}
	if !b.noDSync.Load() {
		done := 0
		for done < len(p) {
			n, err := unix.Pwritev2(b.fd, [][]byte{p[done:]}, off+int64(done), unix.RWF_DSYNC)
			if err == unix.EINTR {
				continue
			}
			if err == unix.ENOSYS || err == unix.EOPNOTSUPP || (err == unix.EINVAL && done == 0) {
				b.noDSync.Store(true)
				break
			}
			if err != nil {
				return done, &os.PathError{Op: "pwritev2", Path: b.f.Name(), Err: err}
			}
			if n == 0 {
				return done, io.ErrShortWrite
			}
			done += n
		}
		if done == len(p) {
			return done, nil
		}
	}
	n, err := b.f.WriteAt(p, off)
	if err != nil {
		return n, err
	}
	return n, b.Flush()
}

// Flush makes written data durable (fdatasync).
func (b *File) Flush() error {
	for {
		err := unix.Fdatasync(b.fd)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "fdatasync", Path: b.f.Name(), Err: err}
		}
		return nil
	}
}

// Discard punches a hole; where that is unsupported it does nothing (a
// discard is only a hint).
func (b *File) Discard(off, length int64) error {
	if err := checkRange(off, length, b.size); err != nil {
		return err
	}
	if length == 0 || b.noPunch.Load() {
		return nil
	}
	err := b.fallocate(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, length)
	if unsupported(err) {
		b.noPunch.Store(true)
		return nil
	}
	return err
}

// WriteZeroes zeroes the range: by punching a hole if mayTrim, else by
// FALLOC_FL_ZERO_RANGE (which keeps it allocated), else by writing zeroes.
func (b *File) WriteZeroes(off, length int64, mayTrim bool) error {
	if err := checkRange(off, length, b.size); err != nil {
		return err
	}
	if length == 0 {
		return nil
	}
	if mayTrim && !b.noPunch.Load() {
		err := b.fallocate(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, length)
		if !unsupported(err) {
			return err
		}
		b.noPunch.Store(true)
	}
	if !b.noZeroRange.Load() {
		err := b.fallocate(unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, off, length)
		if !unsupported(err) {
			return err
		}
		b.noZeroRange.Store(true)
	}
	zero := make([]byte, min(length, 1<<20))
	for length > 0 {
		n := min(length, int64(len(zero)))
		if _, err := b.f.WriteAt(zero[:n], off); err != nil {
			return err
		}
		off += n
		length -= n
	}
	return nil
}

func (b *File) fallocate(mode uint32, off, length int64) error {
	for {
		err := unix.Fallocate(b.fd, mode, off, length)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "fallocate", Path: b.f.Name(), Err: err}
		}
		return nil
	}
}

func unsupported(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) ||
		errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENODEV)
}
