// Package engine is mdtool's userspace RAID engine: it opens the members of
// a Linux md array (v1.x superblocks) and serves reads and writes with the
// exact data layout, parity, write-intent bitmap and superblock state
// changes of the Linux 6.1 md driver, so that the kernel can assemble the
// members afterwards and find them consistent.
//
// Members are [Device]s: image files and block devices ([OpenFile]),
// memory ([NewMemDevice]) or any wrapper ([Section], [FaultDevice]).
// [Open] assembles an [Array] from them.
package engine

import (
	"errors"
	"fmt"
	"io"
)

// Device is one member's storage. Offsets and lengths are in bytes.
// Implementations must be safe for concurrent use; the engine never
// issues overlapping concurrent writes to one device.
type Device interface {
	io.ReaderAt
	io.WriterAt
	// Flush makes every completed write durable.
	Flush() error
	// Discard tells the device that the range is unused. Afterwards the
	// range reads as zeroes if Geometry().DiscardZeroes, else as anything.
	Discard(off, n int64) error
	Close() error
	Geometry() DeviceGeometry
}

// DeviceGeometry describes a device.
type DeviceGeometry struct {
	Size          int64  // bytes
	LogicalBlock  uint32 // bytes; I/O must be aligned to it
	PhysicalBlock uint32 // bytes
	IOMin         uint32 // bytes, 0 if unknown
	IOOpt         uint32 // bytes, 0 if unknown
	// DiscardZeroes says a discarded range reads back as zeroes.
	DiscardZeroes bool
	// Memory says the device completes I/O at memory speed, so the engine
	// does not fan its member I/O out to goroutines for small requests.
	Memory bool
}

// ZeroWriter is implemented by devices that can zero a range cheaply.
type ZeroWriter interface {
	WriteZeroes(off, n int64) error
}

// FUAWriter is implemented by devices that can make one write durable
// without flushing everything else (forced unit access).
type FUAWriter interface {
	WriteAtFUA(p []byte, off int64) (int, error)
}

// Errors.
var (
	// ErrAlignment: the request is not aligned to the logical block size.
	ErrAlignment = errors.New("engine: request not aligned to the logical block size")
	// ErrBeyondEnd: member I/O at or past the device's current end (a
	// file truncated or a device shrunk while it is served). Not a media
	// error that rewriting repairs: the engine fails the member.
	ErrBeyondEnd = errors.New("engine: I/O beyond the end of the device")
	// ErrZeroSize: the array would have no data (Open refuses it).
	ErrZeroSize = errors.New("engine: array size is 0")
	// ErrRange: the request goes beyond the end of the device or array.
	ErrRange = errors.New("engine: request beyond the end")
	// ErrClosed: the array or device is closed.
	ErrClosed = errors.New("engine: closed")
	// ErrReadOnly: a write to an array opened read-only.
	ErrReadOnly = errors.New("engine: array is read-only")
	// ErrFailed: the array has lost more members than its redundancy.
	ErrFailed = errors.New("engine: array has failed: not enough working members")
	// ErrInjected is the default error of a FaultDevice rule.
	ErrInjected = errors.New("engine: injected I/O error")
)

// writeZeroes zeroes [off, off+n) on d, natively when d can, else by
// writing a zero buffer.
func writeZeroes(d Device, off, n int64) error {
	if z, ok := d.(ZeroWriter); ok {
		return z.WriteZeroes(off, n)
	}
	return writeZeroBuf(d, off, n)
}

func writeZeroBuf(d Device, off, n int64) error {
	for n > 0 {
		c := n
		if c > int64(len(zeroPage)) {
			c = int64(len(zeroPage))
		}
		if _, err := d.WriteAt(zeroPage[:c], off); err != nil {
			return err
		}
		off += c
		n -= c
	}
	return nil
}

// zeroPage is a read-only buffer of zeroes (1 MiB, 4 KiB aligned).
var zeroPage = alignedSlice(1<<20, 4096)

// alignedSlice returns n bytes whose address is a multiple of align.
func alignedSlice(n, align int) []byte {
	b := make([]byte, n+align)
	a := int(addrOf(b) & uintptr(align-1))
	if a != 0 {
		a = align - a
	}
	return b[a : a+n : a+n]
}

func checkRange(off, n, size int64) error {
	if off < 0 || n < 0 || off+n > size || off+n < off {
		return fmt.Errorf("%w: [%d, %d) of %d", ErrRange, off, off+n, size)
	}
	return nil
}

// section is a window of a device.
type section struct {
	d    Device
	off  int64
	size int64
}

// Section returns the window [off, off+size) of d as a device of its own.
// Closing it does not close d.
func Section(d Device, off, size int64) Device {
	return &section{d: d, off: off, size: size}
}

func (s *section) ReadAt(p []byte, off int64) (int, error) {
	if err := checkRange(off, int64(len(p)), s.size); err != nil {
		return 0, err
	}
	return s.d.ReadAt(p, off+s.off)
}

func (s *section) WriteAt(p []byte, off int64) (int, error) {
	if err := checkRange(off, int64(len(p)), s.size); err != nil {
		return 0, err
	}
	return s.d.WriteAt(p, off+s.off)
}

func (s *section) WriteAtFUA(p []byte, off int64) (int, error) {
	if err := checkRange(off, int64(len(p)), s.size); err != nil {
		return 0, err
	}
	if f, ok := s.d.(FUAWriter); ok {
		return f.WriteAtFUA(p, off+s.off)
	}
	n, err := s.d.WriteAt(p, off+s.off)
	if err == nil {
		err = s.d.Flush()
	}
	return n, err
}

func (s *section) WriteZeroes(off, n int64) error {
	if err := checkRange(off, n, s.size); err != nil {
		return err
	}
	return writeZeroes(s.d, off+s.off, n)
}

func (s *section) Flush() error { return s.d.Flush() }
func (s *section) Close() error { return nil }

func (s *section) Discard(off, n int64) error {
	if err := checkRange(off, n, s.size); err != nil {
		return err
	}
	return s.d.Discard(off+s.off, n)
}

func (s *section) Geometry() DeviceGeometry {
	g := s.d.Geometry()
	g.Size = s.size
	return g
}
