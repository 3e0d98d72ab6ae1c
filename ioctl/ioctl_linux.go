//go:build linux

package ioctl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Geometry describes a block device (or an image file standing in for one).
type Geometry struct {
	Size              uint64 // bytes
	LogicalBlockSize  uint32 // bytes (BLKSSZGET)
	PhysicalBlockSize uint32 // bytes (BLKPBSZGET)
	IOMin             uint32 // bytes (BLKIOMIN), 0 = unknown
	IOOpt             uint32 // bytes (BLKIOOPT), 0 = unknown
	Rotational        bool   // sysfs queue/rotational; false when unknown
	IsBlockDevice     bool
	Dev               uint64 // st_rdev of a block device, 0 for files
}

// Sectors is the size in 512-byte sectors, rounded down.
func (g Geometry) Sectors() uint64 { return g.Size >> 9 }

// Defaults reported for regular files.
const (
	FileLogicalBlockSize  = 512
	FilePhysicalBlockSize = 4096
)

// ErrBusy is matched (errors.Is) by the error OpenMember returns in
// exclusive mode when a block device is in use (mounted, part of a running
// md array, held open exclusively by another program) or an image file is
// locked by another mdtool command or daemon.
var ErrBusy = errors.New("device or resource busy")

// BusyError is OpenMember's error for a busy member. It matches
// both ErrBusy and syscall.EBUSY.
type BusyError struct {
	Path string
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("cannot open %s: Device or resource busy (in use by a mounted filesystem, an md array or another program)", e.Path)
}

// Unwrap lets errors.Is match ErrBusy and syscall.EBUSY.
func (e *BusyError) Unwrap() []error { return []error{ErrBusy, syscall.EBUSY} }

// GetGeometry measures f: for a block device through BLKGETSIZE64,
// BLKSSZGET, BLKPBSZGET, BLKIOMIN and BLKIOOPT, falling back to
// /sys/dev/block/MAJ:MIN for any ioctl that fails; for a regular file its
// stat size with FileLogicalBlockSize/FilePhysicalBlockSize and no I/O
// hints. Overrides (SetOverride) for f.Name() are applied
// last.
func GetGeometry(f *os.File) (Geometry, error) {
	fi, err := f.Stat()
	if err != nil {
		return Geometry{}, err
	}
	var g Geometry
	switch {
	case fi.Mode().IsRegular():
		g = Geometry{
			Size:              uint64(fi.Size()),
			LogicalBlockSize:  FileLogicalBlockSize,
			PhysicalBlockSize: FilePhysicalBlockSize,
		}
	case fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0:
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return Geometry{}, &os.PathError{Op: "stat", Path: f.Name(), Err: errors.New("no device number")}
		}
		g, err = blockGeometry(f, uint64(st.Rdev))
		if err != nil {
			return Geometry{}, err
		}
	default:
		return Geometry{}, &os.PathError{Op: "get geometry", Path: f.Name(), Err: errors.New("not a block device or regular file")}
	}
	if o, ok := overrideFor(f.Name()); ok {
		g = o.Apply(g)
	}
	return g, nil
}

func blockGeometry(f *os.File, rdev uint64) (Geometry, error) {
	g := Geometry{IsBlockDevice: true, Dev: rdev}
	sys := sysfsDir(rdev)
	fd := int(f.Fd())

	size, err := BlockDeviceSize(fd)
	if err != nil {
		sectors, serr := readSysfsUint(filepath.Join(sys, "size"))
		if serr != nil {
			return Geometry{}, &os.PathError{Op: "get size", Path: f.Name(), Err: os.NewSyscallError("ioctl(BLKGETSIZE64)", err)}
		}
		size = sectors * 512
	}
	g.Size = size

	get := func(req uint, name, sysfile string) (uint32, error) {
		v, err := unix.IoctlGetUint32(fd, req)
		if err == nil {
			return v, nil
		}
		q, qerr := queueDir(sys)
		if qerr == nil {
			if n, serr := readSysfsUint(filepath.Join(q, sysfile)); serr == nil {
				return uint32(n), nil
			}
		}
		return 0, &os.PathError{Op: "get " + sysfile, Path: f.Name(), Err: os.NewSyscallError("ioctl("+name+")", err)}
	}
	if g.LogicalBlockSize, err = get(unix.BLKSSZGET, "BLKSSZGET", "logical_block_size"); err != nil {
		return Geometry{}, err
	}
	if g.PhysicalBlockSize, err = get(unix.BLKPBSZGET, "BLKPBSZGET", "physical_block_size"); err != nil {
		return Geometry{}, err
	}
	if g.IOMin, err = get(unix.BLKIOMIN, "BLKIOMIN", "minimum_io_size"); err != nil {
		return Geometry{}, err
	}
	if g.IOOpt, err = get(unix.BLKIOOPT, "BLKIOOPT", "optimal_io_size"); err != nil {
		return Geometry{}, err
	}
	if q, err := queueDir(sys); err == nil {
		if n, err := readSysfsUint(filepath.Join(q, "rotational")); err == nil {
			g.Rotational = n == 1
		}
	}
	return g, nil
}

// BlockDeviceSize is BLKGETSIZE64 on an open block device: its size in
// bytes now (a resize shows at once).
func BlockDeviceSize(fd int) (uint64, error) {
	var size uint64
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(unix.BLKGETSIZE64), uintptr(unsafe.Pointer(&size)))
	if errno != 0 {
		return 0, errno
	}
	return size, nil
}

// sysfsDir is /sys/dev/block/MAJ:MIN for a device number.
func sysfsDir(rdev uint64) string {
	return fmt.Sprintf("/sys/dev/block/%d:%d", Major(rdev), Minor(rdev))
}

// queueDir finds the queue directory: the device's own, or its parent's
// for a partition.
func queueDir(sys string) (string, error) {
	for _, q := range []string{filepath.Join(sys, "queue"), filepath.Join(sys, "..", "queue")} {
		if fi, err := os.Stat(q); err == nil && fi.IsDir() {
			return q, nil
		}
	}
	return "", os.ErrNotExist
}

func readSysfsUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// OpenExclusive opens path for reading (and writing if writable),
// refusing a member in use with *BusyError: OpenMember with Exclusive.
func OpenExclusive(path string, writable bool) (*os.File, error) {
	return OpenMember(path, OpenOptions{Write: writable, Exclusive: true})
}

// FlushBuffers issues BLKFLSBUF: write out and drop the device's buffer
// cache. It is a no-op for regular files.
func FlushBuffers(f *os.File) error {
	if !isBlock(f) {
		return nil
	}
	if err := unix.IoctlSetInt(int(f.Fd()), unix.BLKFLSBUF, 0); err != nil {
		return &os.PathError{Op: "flush buffers", Path: f.Name(), Err: os.NewSyscallError("ioctl(BLKFLSBUF)", err)}
	}
	return nil
}

// Discard issues BLKDISCARD for length bytes at offset (both multiples of
// the logical block size). For a regular file it punches a hole instead.
func Discard(f *os.File, offset, length uint64) error {
	if !isBlock(f) {
		err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(offset), int64(length))
		if err != nil {
			return &os.PathError{Op: "discard", Path: f.Name(), Err: os.NewSyscallError("fallocate", err)}
		}
		return nil
	}
	return rangeIoctl(f, unix.BLKDISCARD, "BLKDISCARD", "discard", offset, length)
}

// ZeroOut issues BLKZEROOUT: length bytes at offset read back as zeroes
// afterwards. For a regular file it uses fallocate(ZERO_RANGE), falling
// back to punching a hole.
func ZeroOut(f *os.File, offset, length uint64) error {
	if !isBlock(f) {
		err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, int64(offset), int64(length))
		if err != nil {
			err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(offset), int64(length))
		}
		if err != nil {
			return &os.PathError{Op: "zero out", Path: f.Name(), Err: os.NewSyscallError("fallocate", err)}
		}
		return nil
	}
	return rangeIoctl(f, unix.BLKZEROOUT, "BLKZEROOUT", "zero out", offset, length)
}

func rangeIoctl(f *os.File, req uint, name, op string, offset, length uint64) error {
	r := [2]uint64{offset, length}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), uintptr(req), uintptr(unsafe.Pointer(&r)))
	runtime.KeepAlive(&r)
	if errno != 0 {
		return &os.PathError{Op: op, Path: f.Name(), Err: os.NewSyscallError("ioctl("+name+")", errno)}
	}
	return nil
}

func isBlock(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0
}

// DeviceNumber returns st_rdev of a block device path, or an error if
// path is not a block device.
func DeviceNumber(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return 0, &os.PathError{Op: "stat", Path: path, Err: errors.New("not a block device")}
	}
	return uint64(st.Rdev), nil
}
