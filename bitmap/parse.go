package bitmap

import (
	"errors"
	"fmt"
	"math/bits"
)

// Rule sentinels carried by [FormatError.Err]. They mirror the reasons
// Linux's md_bitmap_read_sb gives ("invalid bitmap file superblock: ...").
var (
	// ErrVersion: version outside 3..5 ("unrecognized superblock version").
	ErrVersion = errors.New("bitmap: unrecognized superblock version")
	// ErrChunkSize: chunksize below 512 or not a power of two.
	ErrChunkSize = errors.New("bitmap: bad chunksize")
	// ErrDaemonSleep: daemon_sleep*HZ is 0 in the kernel's arithmetic.
	ErrDaemonSleep = errors.New("bitmap: daemon sleep period out of range")
	// ErrWriteBehind: write_behind above CounterMax.
	ErrWriteBehind = errors.New("bitmap: write-behind limit out of range")
)

// ErrLockless is returned by [Parse] (with the decoded header) for a
// version 6 ("lockless", llbitmap) bitmap. Linux 6.1 and mdadm 4.2 do not
// know this format; mdtool does not support it either.
var ErrLockless = errors.New("bitmap: lockless bitmap (version 6), not supported")

// Parse decodes the bitmap superblock at the start of b and checks it the
// way the kernel does when it loads an internal bitmap (md_bitmap_read_sb).
//
//   - len(b) < [HeaderSize]: nil, [ErrShort].
//   - wrong magic: nil, [ErrBadMagic].
//   - version 6: the header and [ErrLockless] (no further checks; the
//     version-4 rules do not apply to that format).
//   - otherwise the header, and nil or the errors.Join of one
//     *[FormatError] per refused field (see [Header.Validate]).
//
// Only the first HeaderSize bytes are read; the bits that follow are
// reached with [BitsOf]. Array-dependent checks (uuid, events) are in
// [Header.CheckFor].
func Parse(b []byte) (*Header, error) {
	if len(b) < HeaderSize {
		return nil, ErrShort
	}
	if le.Uint32(b) != Magic {
		return nil, ErrBadMagic
	}
	h := decodeHeader(b)
	if h.Version == VersionLockless {
		return h, ErrLockless
	}
	return h, h.Validate()
}

// Validate applies the field checks of the kernel's md_bitmap_read_sb
// (identical in Linux 6.1 and current kernels). It returns nil or the
// errors.Join of *[FormatError] values, one per bad field; the kernel stops
// at the first, in this order:
//
//   - magic must be [Magic] (offset 0);
//   - version must be 3..5 (offset 4; [ErrVersion]);
//   - chunksize must be >= 512 and a power of two (offset 52; [ErrChunkSize]);
//   - daemon_sleep: the kernel computes le32(daemon_sleep) * HZ in 32-bit
//     unsigned arithmetic and refuses a result < 1 (the "> MAX_SCHEDULE_TIMEOUT"
//     half cannot trigger on 64-bit kernels). With HZ = [KernelHZ] = 250
//     that refuses exactly 0 and 0x80000000 (offset 56; [ErrDaemonSleep]);
//   - write_behind must be <= [CounterMax] (offset 60; [ErrWriteBehind]).
//
// Version 6 gets an [ErrVersion] here; [Parse] reports it as [ErrLockless].
func (h *Header) Validate() error {
	var errs []error
	if h.Magic != Magic {
		errs = append(errs, &FormatError{0, "magic",
			fmt.Sprintf("bad magic 0x%08x", h.Magic), ErrBadMagic})
	}
	if h.Version < VersionHostEndian || h.Version > VersionClustered {
		errs = append(errs, &FormatError{4, "version",
			fmt.Sprintf("unrecognized superblock version %d", h.Version), ErrVersion})
	}
	if h.ChunkSize < 512 {
		errs = append(errs, &FormatError{52, "chunksize",
			fmt.Sprintf("bitmap chunksize too small (%d)", h.ChunkSize), ErrChunkSize})
	} else if bits.OnesCount32(h.ChunkSize) != 1 {
		errs = append(errs, &FormatError{52, "chunksize",
			fmt.Sprintf("bitmap chunksize not a power of 2 (%d)", h.ChunkSize), ErrChunkSize})
	}
	if h.DaemonSleep*KernelHZ == 0 { // uint32 arithmetic, as in the kernel
		errs = append(errs, &FormatError{56, "daemon_sleep",
			fmt.Sprintf("daemon sleep period out of range (%d)", h.DaemonSleep), ErrDaemonSleep})
	}
	if h.WriteBehind > CounterMax {
		errs = append(errs, &FormatError{60, "write_behind",
			fmt.Sprintf("write-behind limit out of range (0 - 16383): %d", h.WriteBehind), ErrWriteBehind})
	}
	return errors.Join(errs...)
}

// ErrUUIDMismatch is returned by [Header.CheckFor] when the bitmap belongs
// to another array ("bitmap superblock UUID mismatch"); the kernel refuses
// to load such a bitmap.
var ErrUUIDMismatch = errors.New("bitmap: bitmap superblock UUID mismatch")

// ErrWriteErrorState is returned by [Header.CheckFor] when the state field
// has [StateWriteError]: the kernel ORs state into its flags and then fails
// bitmap creation with -EIO (md_bitmap_create).
var ErrWriteErrorState = errors.New("bitmap: state has BITMAP_WRITE_ERROR set")

// StaleError reports a bitmap the kernel would load but not trust: every
// chunk is then treated as dirty ("bitmap file is out of date ... forcing
// full recovery"). The caller should resync everything (from the array's
// resync checkpoint) instead of only the dirty chunks.
type StaleError struct {
	Events      uint64 // the bitmap's events
	ArrayEvents uint64 // the array superblock's events
	Flagged     bool   // the state field already had StateStale
}

// Error describes why the bitmap is stale.
func (e *StaleError) Error() string {
	if e.Events < e.ArrayEvents {
		return fmt.Sprintf("bitmap: bitmap file is out of date (%d < %d) -- forcing full recovery",
			e.Events, e.ArrayEvents)
	}
	return "bitmap: bitmap marked stale -- forcing full recovery"
}

// CheckFor applies the kernel's array-dependent load rules to a header that
// passed [Header.Validate], for an array with the given set uuid and
// superblock events (md_bitmap_read_sb, md_bitmap_create):
//
//   - uuid differs: [ErrUUIDMismatch] (refused);
//   - state has [StateWriteError]: [ErrWriteErrorState] (refused, -EIO);
//   - events < array events (only when the bitmap is not a clustered one
//     with nodes > 0), or state has [StateStale]: a *[StaleError]
//     (accepted, full recovery);
//   - otherwise nil.
//
// A bitmap whose events are ahead of the array's is accepted (md writes the
// bitmap superblock before the array superblocks).
func (h *Header) CheckFor(uuid [16]byte, events uint64) error {
	if h.UUID != uuid {
		return ErrUUIDMismatch
	}
	if h.State&StateWriteError != 0 {
		return ErrWriteErrorState
	}
	var nodes uint32
	if h.Version == VersionClustered {
		nodes = h.Nodes
	}
	older := nodes == 0 && h.Events < events
	if older || h.State&StateStale != 0 {
		return &StaleError{Events: h.Events, ArrayEvents: events, Flagged: h.State&StateStale != 0}
	}
	return nil
}

// ReAddable reports whether a member whose superblock has devEvents can be
// re-added to a running array with this bitmap and recovered from the
// bitmap alone: the kernel refuses bitmap-based recovery when the member is
// older than events_cleared (super_1_validate: ev1 < events_cleared).
func (h *Header) ReAddable(devEvents uint64) bool { return devEvents >= h.EventsCleared }

// Decode decodes the bitmap superblock at the start of b as it is,
// whatever its magic and version and without any check: what a tool
// showing a damaged bitmap prints. It returns nil, [ErrShort] when b is
// shorter than [HeaderSize].
func Decode(b []byte) (*Header, error) {
	if len(b) < HeaderSize {
		return nil, ErrShort
	}
	return decodeHeader(b), nil
}

// ClusterNameC returns cluster_name read as a C string: up to the first
// NUL, running on into the padding after the 64 bytes (to the end of the
// header) when they hold none, as mdadm's printf("%s") does.
func (h *Header) ClusterNameC() []byte {
	s := append(append([]byte(nil), h.ClusterName[:]...), h.Pad[:]...)
	for i, c := range s {
		if c == 0 {
			return s[:i]
		}
	}
	return s
}

// HasMagic reports whether b starts with the bitmap magic (a file holding
// an external bitmap).
func HasMagic(b []byte) bool { return len(b) >= 4 && le.Uint32(b) == Magic }
