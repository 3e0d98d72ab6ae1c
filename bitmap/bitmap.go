// Package bitmap reads and writes the md internal write-intent bitmap
// (bitmap_super_t, version 4, magic "bitm") and its bit array, byte for byte
// as the Linux md driver (6.1) and mdadm 4.2 do.
//
// It is a pure format package: bytes in, bytes out; no I/O. Besides the
// codec it holds the arithmetic the tools need around the bitmap: mdadm's
// chunk-size choice ([ChooseChunk]), mdadm's initial bitmap area
// ([NewArea]), the kernel's write-size rule for bitmap pages
// ([WriteGeometry.PageWriteSize]) and a sub-page dirty tracker for flushes
// ([DirtyTracker]).
//
// Layout: the 256-byte [Header] is followed directly by the bit array
// ([Bits]), one bit per chunk, least significant bit first in each byte.
// The kernel handles header plus bits ("storage") in 4096-byte pages
// ([PageSize]).
package bitmap

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Magic is BITMAP_MAGIC ("bitm" as little-endian bytes).
const Magic = 0x6d746962

// HeaderSize is the size of bitmap_super_t.
const HeaderSize = 256

// Bitmap superblock versions (the version field).
const (
	// VersionHostEndian is BITMAP_MAJOR_LO/BITMAP_MAJOR_HOSTENDIAN: legacy,
	// bits in host-endian unsigned longs (identical to version 4 on
	// little-endian hosts, which are the only hosts mdtool supports).
	VersionHostEndian = 3
	// Version is BITMAP_MAJOR_HI: little-endian bits, what mdadm writes.
	Version = 4
	// VersionClustered is BITMAP_MAJOR_CLUSTERED: one bitmap per cluster
	// node (md-cluster).
	VersionClustered = 5
	// VersionLockless is the llbitmap format (mdadm 4.6 --bitmap=lockless,
	// experimental). Neither Linux 6.1 nor mdadm 4.2 know it; [Parse]
	// reports it as [ErrLockless].
	VersionLockless = 6
)

// State bits (the state field). The kernel stores its bitmap flags word
// there, so the values are 1<<flag-number.
const (
	StateStale      = 1 << 1  // BITMAP_STALE: bitmap out of date, full resync
	StateWriteError = 1 << 2  // BITMAP_WRITE_ERROR: a bitmap write failed
	StateFirstUse   = 1 << 3  // llbitmap only
	StateClean      = 1 << 4  // llbitmap only
	StateHostEndian = 1 << 15 // BITMAP_HOSTENDIAN (in-kernel flag)
)

// Defaults and limits.
const (
	// DefaultDaemonSleep is mdadm's default --delay, in seconds.
	DefaultDaemonSleep = 5
	// DefaultChunk is mdadm's default internal-bitmap chunk, in bytes
	// ("64Meg is a good default"); larger devices get more (see
	// [ChooseChunk]).
	DefaultChunk = 64 << 20
	// CounterMax is COUNTER_MAX, the largest accepted write_behind.
	CounterMax = 16383
	// KernelHZ is CONFIG_HZ of the reference kernel (Debian 12 amd64,
	// Linux 6.1: CONFIG_HZ=250). The kernel multiplies daemon_sleep by it
	// in 32-bit arithmetic; see [Header.Validate].
	KernelHZ = 250
)

// ErrBadMagic is returned when the header magic is wrong.
var ErrBadMagic = errors.New("bitmap: bad magic")

// ErrShort is returned when the buffer cannot hold a bitmap header.
var ErrShort = errors.New("bitmap: buffer too short")

// FormatError describes a bad field, with its byte offset in the bitmap
// superblock.
//
// Err, when set, is the sentinel naming the rule that was broken
// (ErrVersion, ErrChunkSize, ...), so that errors.Is works on a single
// FormatError and on the errors.Join of several.
type FormatError struct {
	Offset int64  // byte offset of the field within bitmap_super_t
	Field  string // C field name, e.g. "chunksize"
	Msg    string // the kernel's reason text where it has one
	Err    error  // rule sentinel, may be nil
}

// Error formats the error as "bitmap: FIELD at offset 0xOFF: MSG".
func (e *FormatError) Error() string {
	return fmt.Sprintf("bitmap: %s at offset 0x%x: %s", e.Field, e.Offset, e.Msg)
}

// Unwrap returns the rule sentinel, for errors.Is.
func (e *FormatError) Unwrap() error { return e.Err }

// Header is a decoded bitmap_super_t. The comments give each field's byte
// offset. All fields are little-endian on disk.
type Header struct {
	Magic           uint32    // 0
	Version         uint32    // 4
	UUID            [16]byte  // 8
	Events          uint64    // 24
	EventsCleared   uint64    // 32
	SyncSize        uint64    // 40 sectors
	State           uint32    // 48
	ChunkSize       uint32    // 52 bytes per bit
	DaemonSleep     uint32    // 56 seconds
	WriteBehind     uint32    // 60
	SectorsReserved uint32    // 64
	Nodes           uint32    // 68
	ClusterName     [64]byte  // 72
	Pad             [120]byte // 136, zero
}

var le = binary.LittleEndian

// Marshal encodes the header into 256 bytes.
func (h *Header) Marshal() []byte {
	b := make([]byte, HeaderSize)
	le.PutUint32(b[0:], h.Magic)
	le.PutUint32(b[4:], h.Version)
	copy(b[8:24], h.UUID[:])
	le.PutUint64(b[24:], h.Events)
	le.PutUint64(b[32:], h.EventsCleared)
	le.PutUint64(b[40:], h.SyncSize)
	le.PutUint32(b[48:], h.State)
	le.PutUint32(b[52:], h.ChunkSize)
	le.PutUint32(b[56:], h.DaemonSleep)
	le.PutUint32(b[60:], h.WriteBehind)
	le.PutUint32(b[64:], h.SectorsReserved)
	le.PutUint32(b[68:], h.Nodes)
	copy(b[72:136], h.ClusterName[:])
	copy(b[136:256], h.Pad[:])
	return b
}

func decodeHeader(b []byte) *Header {
	h := &Header{
		Magic:           le.Uint32(b[0:]),
		Version:         le.Uint32(b[4:]),
		Events:          le.Uint64(b[24:]),
		EventsCleared:   le.Uint64(b[32:]),
		SyncSize:        le.Uint64(b[40:]),
		State:           le.Uint32(b[48:]),
		ChunkSize:       le.Uint32(b[52:]),
		DaemonSleep:     le.Uint32(b[56:]),
		WriteBehind:     le.Uint32(b[60:]),
		SectorsReserved: le.Uint32(b[64:]),
		Nodes:           le.Uint32(b[68:]),
	}
	copy(h.UUID[:], b[8:24])
	copy(h.ClusterName[:], b[72:136])
	copy(h.Pad[:], b[136:256])
	return h
}

// Chunks returns the number of bits (chunks) covering SyncSize sectors:
// ceil(sync_size*512 / chunksize), computed in 64 bits exactly like mdadm's
// bitmap_bits (which is what `mdadm -X` prints as "N bits"). Zero if
// ChunkSize is zero.
func (h *Header) Chunks() uint64 {
	if h.ChunkSize == 0 {
		return 0
	}
	c := uint64(h.ChunkSize)
	return (h.SyncSize*512 + c - 1) / c
}

// Bytes returns the size of the on-disk bitmap: header plus ceil(chunks/8).
// This is the kernel's storage.bytes (md_bitmap_storage_alloc).
func (h *Header) Bytes() uint64 { return HeaderSize + (h.Chunks()+7)/8 }
