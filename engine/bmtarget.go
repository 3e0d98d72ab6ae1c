package engine

import (
	"fmt"
	"time"

	"mdtool/bitmap"
)

// The types below mirror the engine/wib contract
// (notes/engine-contract.md) so that the engine builds before wib lands.

// BitmapConfig is what the bitmap runtime starts from.
type BitmapConfig struct {
	Header  bitmap.Header
	Bits    []byte // on-disk bits at open (after the 256-byte header)
	SubPage bool
	Clock   func() time.Time
}

// BitmapMember is a member carrying the bitmap.
type BitmapMember struct {
	Index                              int
	LogicalBlock, PhysicalBlock, IOOpt uint32
	BitmapStart                        int64 // bytes, absolute on the member
	Limit                              int64 // bytes: first byte the bitmap must not touch
}

// BitmapTarget is how the bitmap runtime writes to the members.
type BitmapTarget interface {
	WriteBitmap(member int, off int64, p []byte) error
	Members() []BitmapMember
}

// writeIntentRuntime is the bitmap runtime as the engine drives it.
type writeIntentRuntime = writeIntent

// bitmapTarget gives the bitmap runtime access to the array's members.
type bitmapTarget struct{ a *Array }

// WriteBitmap writes p at off from the bitmap superblock of member index
// (an index into Array.all), durably. A failed write makes the member
// faulty, as md_error does from the bitmap's write path.
func (t bitmapTarget) WriteBitmap(index int, off int64, p []byte) error {
	a := t.a
	if index < 0 || index >= len(a.all) {
		return fmt.Errorf("engine: bitmap write to unknown member %d", index)
	}
	m := a.all[index]
	if !m.writable() {
		return nil
	}
	start := (int64(m.ls.offset) + int64(m.ls.sb.BitmapOffset)) * 512
	if err := writeDurable(m.dev, p, start+off); err != nil {
		a.failMember(m, err)
		return err
	}
	return nil
}

// Members lists the active, non-faulty members (md writes bitmap pages to
// every rdev with a role that is not faulty).
func (t bitmapTarget) Members() []BitmapMember {
	a := t.a
	var out []BitmapMember
	for i, m := range a.all {
		if m.role < 0 || !m.writable() {
			continue
		}
		g := m.dev.Geometry()
		start := (int64(m.ls.offset) + int64(m.ls.sb.BitmapOffset)) * 512
		limit := m.dataOff
		if m.ls.sb.BitmapOffset < 0 {
			limit = int64(m.ls.offset) * 512
		} else if m.dataOff < start {
			// superblock (and bitmap) after the data: nothing behind it
			limit = g.Size
		}
		out = append(out, BitmapMember{Index: i, LogicalBlock: g.LogicalBlock, PhysicalBlock: g.PhysicalBlock,
			IOOpt: g.IOOpt, BitmapStart: start, Limit: limit})
	}
	return out
}
