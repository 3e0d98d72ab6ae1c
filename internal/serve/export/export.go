// Package export defines Backend, the byte-addressed device that a block
// export (internal/serve/nbd, internal/serve/fuseexport) serves, and two simple Backends:
// Mem (sparse, in memory, for tests and benchmarks) and File (a regular file
// or block device).
//
// The exporters validate every request against Size and BlockSizes before
// calling a Backend, so a Backend sees only in-range offsets and lengths
// aligned to its minimum block size (exporters may pass through unaligned
// requests only when the minimum block size is 1).
package export

import (
	"errors"
	"fmt"
	"math/bits"
)

// Backend is what an export serves. All methods may be called concurrently.
type Backend interface {
	// ReadAt reads len(p) bytes at off.
	ReadAt(p []byte, off int64) (int, error)
	// WriteAt writes p at off. It must not retain p after it returns.
	WriteAt(p []byte, off int64) (int, error)
	// WriteAtFUA is WriteAt that is durable before it returns.
	WriteAtFUA(p []byte, off int64) (int, error)
	// Flush makes every write acknowledged so far durable, whichever
	// connection or caller issued it.
	Flush() error
	// Discard is a hint that [off, off+length) is no longer needed; the
	// range reads back as unspecified data afterwards.
	Discard(off, length int64) error
	// WriteZeroes makes [off, off+length) read back as zeroes. With mayTrim
	// the Backend may deallocate the range; without it the range must stay
	// provisioned.
	WriteZeroes(off, length int64, mayTrim bool) error
	// Size is the device size in bytes.
	Size() int64
	// BlockSizes returns the minimum block (logical block size), the
	// preferred block (the smallest efficient write, e.g. a full stripe)
	// and the maximum payload of one request (at least 1 MiB).
	BlockSizes() (min, preferred, max uint32)
}

// ErrBlockSizes reports block sizes a Backend may not use.
var ErrBlockSizes = errors.New("export: invalid block sizes")

// CheckBlockSizes checks block sizes against the rules every exporter relies
// on: min a power of two of at most 64 KiB, preferred a multiple of min of at
// least 512, and max at least 1 MiB and at least preferred.
func CheckBlockSizes(min, preferred, max uint32) error {
	switch {
	case min == 0 || bits.OnesCount32(min) != 1 || min > 64<<10:
		return fmt.Errorf("%w: minimum %d is not a power of two up to 65536", ErrBlockSizes, min)
	case preferred < 512 || preferred < min || preferred%min != 0:
		return fmt.Errorf("%w: preferred %d is not a multiple of minimum %d and at least 512", ErrBlockSizes, preferred, min)
	case max < 1<<20 || max < preferred:
		return fmt.Errorf("%w: maximum %d is below 1 MiB or below preferred %d", ErrBlockSizes, max, preferred)
	}
	return nil
}

// ErrRange is returned by the Backends of this package for an access outside
// the device.
var ErrRange = errors.New("export: access beyond the end of the device")

func checkRange(off, n, size int64) error {
	if off < 0 || n < 0 || off > size || n > size-off {
		return fmt.Errorf("%w: offset %d length %d size %d", ErrRange, off, n, size)
	}
	return nil
}
