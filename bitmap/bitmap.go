// Package bitmap reads and writes the md internal write-intent bitmap
// (bitmap_super_t, version 4, magic "bitm") and its bit array, byte for byte
// as the Linux md driver and mdadm do.
//
// It is a pure format package: bytes in, bytes out; no I/O.
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

// Versions.
const (
	VersionHostEndian = 3 // legacy, bits in host-endian longs
	Version           = 4 // BITMAP_MAJOR_HI: little-endian bits (normal)
	VersionClustered  = 5
	VersionLockless   = 6 // llbitmap (experimental, mdadm 4.6 --bitmap=lockless)
)

// State bits.
const (
	StateStale      = 1 << 1 // BITMAP_STALE
	StateWriteError = 1 << 2 // BITMAP_WRITE_ERROR
	StateFirstUse   = 1 << 3 // llbitmap
	StateClean      = 1 << 4 // llbitmap
	StateHostEndian = 1 << 15
)

// Defaults used by mdadm.
const (
	DefaultDaemonSleep = 5        // seconds
	DefaultChunk       = 64 << 20 // bytes, "64Meg is a good default"
	CounterMax         = 16383    // COUNTER_MAX: max write_behind
)

// ErrBadMagic is returned when the header magic is wrong.
var ErrBadMagic = errors.New("bitmap: bad magic")

// ErrShort is returned when the buffer cannot hold a bitmap header.
var ErrShort = errors.New("bitmap: buffer too short")

// FormatError describes a bad field, with its byte offset in the bitmap
// superblock.
type FormatError struct {
	Offset int64
	Field  string
	Msg    string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("bitmap: %s at offset 0x%x: %s", e.Field, e.Offset, e.Msg)
}

// Header is a decoded bitmap_super_t.
type Header struct {
	Magic           uint32   // 0
	Version         uint32   // 4
	UUID            [16]byte // 8
	Events          uint64   // 24
	EventsCleared   uint64   // 32
	SyncSize        uint64   // 40 sectors
	State           uint32   // 48
	ChunkSize       uint32   // 52 bytes per bit
	DaemonSleep     uint32   // 56 seconds
	WriteBehind     uint32   // 60
	SectorsReserved uint32   // 64
	Nodes           uint32   // 68
	ClusterName     [64]byte // 72
	Pad             [120]byte
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
// ceil(sync_size*512 / chunksize). Zero if ChunkSize is zero.
func (h *Header) Chunks() uint64 {
	if h.ChunkSize == 0 {
		return 0
	}
	c := uint64(h.ChunkSize)
	return (h.SyncSize*512 + c - 1) / c
}

// Bytes returns the size of the on-disk bitmap: header plus ceil(chunks/8).
func (h *Header) Bytes() uint64 { return HeaderSize + (h.Chunks()+7)/8 }
