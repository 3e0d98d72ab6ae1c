package plan

import (
	"strings"

	"mdtool/bitmap"
)

// DefaultFileBitmapChunk is mdadm's DEFAULT_BITMAP_CHUNK: the smallest
// chunk (bytes) CreateBitmap gives a bitmap file when none is given.
const DefaultFileBitmapChunk = 4096

// IsBitmapFile reports whether a --bitmap value names an external bitmap
// file (mdadm: anything with a '/' that is not "internal"/"none").
func IsBitmapFile(v string) bool {
	return v != "internal" && v != "none" && v != "clustered" && strings.Contains(v, "/")
}

// FileBitmapChunk is CreateBitmap's chunk for a bitmap file covering size
// sectors: the given chunk, or DEFAULT_BITMAP_CHUNK doubled until there
// are at most 2^20 chunks.
func FileBitmapChunk(size, given uint64) uint64 {
	if given != 0 {
		return given
	}
	c := uint64(DefaultFileBitmapChunk)
	for size > c<<(20-9) {
		c <<= 1
	}
	return c
}

// NewBitmapFile is the content mdadm 4.2's CreateBitmap writes to a
// bitmap file: the header (events 0, state 0) and every bit set, the file
// ending right after the last bit byte.
func NewBitmapFile(h bitmap.Header) []byte {
	out := make([]byte, 0, h.Bytes())
	out = append(out, h.Marshal()...)
	for n := (h.Chunks() + 7) / 8; n > 0; n-- {
		out = append(out, 0xff)
	}
	return out
}

// fileBitmap is Create()'s CreateBitmap call for --bitmap=FILE: the header
// mdadm writes into the file (the superblocks say nothing of it).
func (p *planner) fileBitmap() error {
	if !IsBitmapFile(p.o.Bitmap) {
		return nil
	}
	size := p.size * 2
	if p.level == LevelRAID10 {
		near, far, _ := RAID10Copies(p.layout)
		size = p.size * uint64(p.raid) / uint64(near*far) * 2
	}
	h := bitmap.Header{
		Magic:       bitmap.Magic,
		Version:     bitmap.Version, // BITMAP_MAJOR_HI, also for 0.90
		ChunkSize:   uint32(FileBitmapChunk(size, p.o.BitmapChunk)),
		DaemonSleep: bitmap.DefaultDaemonSleep,
		WriteBehind: p.o.WriteBehind,
		SyncSize:    size,
	}
	if p.o.BitmapDelay != 0 {
		h.DaemonSleep = p.o.BitmapDelay
	}
	switch {
	case p.sb != nil && p.minor != Minor090:
		h.UUID = p.sb.SetUUID
	default:
		for _, m := range p.r.Members {
			if m.V090 != nil {
				h.UUID = m.V090.BitmapUUID090()
				break
			}
		}
	}
	p.r.BitmapFileHeader = &h
	p.r.BitmapChunk = uint64(h.ChunkSize)
	p.r.BitmapSyncSize = size
	return nil
}
