package bitmap

import (
	"encoding/binary"
	"math/bits"
)

// PageSize is the unit in which the kernel reads and writes the bitmap
// storage (PAGE_SIZE on x86-64 and on arm64 with 4 KiB pages).
const PageSize = 4096

// pageBits is PAGE_BITS: bits per page.
const pageBits = PageSize * 8

// Bits is the on-disk bit array: the bytes right after the 256-byte header.
// Chunk i is bit i%8 (least significant first) of byte i/8, as the kernel's
// set_bit_le/test_bit_le address it. (Version 3, host-endian, is the same
// on little-endian hosts.)
//
// Methods ignore chunks beyond the slice, like the kernel ignores chunks
// beyond its bitmap pages.
type Bits []byte

// BitsOf returns the bit array of a bitmap area that starts with the
// header: area[HeaderSize:], or nil when area is shorter than that. The
// result shares memory with area.
func BitsOf(area []byte) Bits {
	if len(area) < HeaderSize {
		return nil
	}
	return Bits(area[HeaderSize:])
}

// Len returns the number of bits the slice can hold (8 per byte).
func (b Bits) Len() uint64 { return uint64(len(b)) * 8 }

// Test reports whether the chunk's bit is set (false beyond the slice).
func (b Bits) Test(chunk uint64) bool {
	if chunk >= b.Len() {
		return false
	}
	return b[chunk>>3]&(1<<(chunk&7)) != 0
}

// Set sets the chunk's bit (marks the chunk dirty). No-op beyond the slice.
func (b Bits) Set(chunk uint64) {
	if chunk < b.Len() {
		b[chunk>>3] |= 1 << (chunk & 7)
	}
}

// Clear clears the chunk's bit. No-op beyond the slice.
func (b Bits) Clear(chunk uint64) {
	if chunk < b.Len() {
		b[chunk>>3] &^= 1 << (chunk & 7)
	}
}

// CountDirty counts the set bits among the first total chunks, the way
// `mdadm -X` computes "N dirty" (mdadm 4.2 bitmap.c count_dirty_bits via
// bitmap_fd_read): whole bytes first, then only the low total%8 bits of the
// last partial byte; bits at and beyond total are ignored even if set
// (mdadm's create writes 0xff to the end of the area).
//
// counted is min(total, Len()): when the bit array is shorter than total
// chunks mdadm warns "bitmap file is not large enough for array size" and
// prints counted as the number of bits. mdadm -X reports total=0 (and 0
// dirty) when sync_size or chunksize is 0.
func (b Bits) CountDirty(total uint64) (dirty, counted uint64) {
	counted = total
	if n := b.Len(); counted > n {
		counted = n
	}
	full := counted >> 3
	p := b[:full]
	for len(p) >= 32 {
		dirty += uint64(bits.OnesCount64(binary.LittleEndian.Uint64(p)) +
			bits.OnesCount64(binary.LittleEndian.Uint64(p[8:])) +
			bits.OnesCount64(binary.LittleEndian.Uint64(p[16:])) +
			bits.OnesCount64(binary.LittleEndian.Uint64(p[24:])))
		p = p[32:]
	}
	for len(p) >= 8 {
		dirty += uint64(bits.OnesCount64(binary.LittleEndian.Uint64(p)))
		p = p[8:]
	}
	for _, c := range p {
		dirty += uint64(bits.OnesCount8(c))
	}
	if r := counted & 7; r != 0 {
		dirty += uint64(bits.OnesCount8(b[full] & (1<<r - 1)))
	}
	return dirty, counted
}

// ExamineCounts returns what `mdadm -X` prints on its "Bitmap :" line for
// the bitmap area (header followed by bits, as read from the device):
// "<total> bits (chunks), <dirty> dirty". It applies mdadm's special cases:
// both are 0 when sync_size or chunksize is 0, and total shrinks to the
// bits present when area is too short.
func ExamineCounts(h *Header, area []byte) (total, dirty uint64) {
	if h.SyncSize == 0 || h.ChunkSize == 0 {
		return 0, 0
	}
	dirty, total = BitsOf(area).CountDirty(h.Chunks())
	return total, dirty
}

// PageOf returns the index of the 4 KiB storage page (counted from the
// header) that holds the chunk's bit: (chunk + 256*8) >> 15, the kernel's
// file_page_index with an internal superblock.
func PageOf(chunk uint64) uint64 { return (chunk + HeaderSize*8) / pageBits }

// BitInPage returns the bit number of the chunk inside its page, the
// kernel's file_page_offset: (chunk + 256*8) & (PAGE_BITS-1).
func BitInPage(chunk uint64) uint64 { return (chunk + HeaderSize*8) % pageBits }

// ByteOf returns the byte offset, from the start of the header, of the
// byte holding the chunk's bit: 256 + chunk/8.
func ByteOf(chunk uint64) uint64 { return HeaderSize + chunk>>3 }

// FilePages returns the number of 4 KiB pages the kernel uses for a bitmap
// of storageBytes bytes (header included): ceil(bytes/4096), its
// store->file_pages.
func FilePages(storageBytes uint64) uint64 { return (storageBytes + PageSize - 1) / PageSize }
