package wib

import (
	"fmt"
	"sync/atomic"

	"mdtool/bitmap"
)

// Quiesce runs fn with the bitmap lock held and no flush in flight, so
// that fn may change what the Target's members look like (their size,
// the place of their superblock) without a bitmap write racing with it.
func (b *Bitmap) Quiesce(fn func() error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.flushing {
		b.cond.Wait()
	}
	return fn()
}

// Resize is md_bitmap_resize for an array whose sync space changed to
// syncSectors sectors (--grow --size): the bitmap keeps its chunk size
// unless the new bit array does not fit the space the bitmap has
// (spaceSectors, the kernel's bitmap_info.space, counted from the bitmap
// superblock), in which case the chunk doubles until it fits. Set bits and
// NEEDED marks are carried over to the chunks covering the same sectors;
// the chunks from dirtyFrom on (the region a grow added, to be resynced)
// are set and NEEDED. The caller holds every writer and the resync out.
//
// The new storage reaches the members in an order that leaves the bitmap
// usable by the kernel at every point: first the bits (the union of the
// old and the new bit arrays when the chunk changes, under the old
// header), then the header with the new sync_size and chunk size, then,
// when the chunk changed, the exact new bits. It returns the new chunk
// size in bytes.
func (b *Bitmap) Resize(syncSectors, spaceSectors, dirtyFrom uint64) (uint32, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.flushing {
		b.cond.Wait()
	}
	if b.dirtyLocked() {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
	}
	shift := b.shift
	for {
		chunks := (syncSectors + 1<<shift - 1) >> shift
		if bitmap.HeaderSize+(chunks+7)/8 <= spaceSectors*512 || shift >= 31 {
			break
		}
		shift++
	}
	nh := b.hdr
	nh.SyncSize = syncSectors
	nh.ChunkSize = uint32(1) << (shift + 9)
	chunks := nh.Chunks()
	if chunks == 0 {
		return 0, ErrNoChunks
	}
	ctr := make([]atomic.Uint32, chunks)
	for c := uint64(0); c < b.chunks; c++ {
		w := b.ctr[c].Load() & kernMask
		start := c << b.shift
		if w == 0 || start >= syncSectors {
			continue
		}
		nc := start >> shift
		ctr[nc].Store(ctr[nc].Load() | 2 | w&neededBit)
	}
	if dirtyFrom < syncSectors {
		for nc := dirtyFrom >> shift; nc < chunks; nc++ {
			ctr[nc].Store(2 | neededBit)
		}
	}
	nbytes := nh.Bytes()
	img := make([]byte, bitmap.FilePages(max(nbytes, b.bytes))*bitmap.PageSize)
	copy(img, b.hdr.Marshal())
	nb := bitmap.BitsOf(img)
	for c := range ctr {
		if ctr[c].Load() != 0 {
			nb.Set(uint64(c))
		}
	}
	changed := shift != b.shift
	if changed {
		ob := bitmap.BitsOf(b.img)
		for c := uint64(0); c < b.chunks; c++ {
			if ob.Test(c) {
				nb.Set(c)
			}
		}
	}
	// 1: the bits, under the old header.
	if err := b.writeImageLocked(img, max(nbytes, b.bytes)); err != nil {
		return 0, err
	}
	// 2: the header.
	b.hdr = nh
	b.shift, b.chunks = shift, chunks
	b.ctr = ctr
	b.pend = make([]atomic.Bool, (chunks+counterGroup-1)/counterGroup)
	for c := range ctr {
		if ctr[c].Load() != 0 {
			ctr[c].Or(persisted)
			b.pend[uint64(c)/counterGroup].Store(true)
		}
	}
	b.pendingSet, b.clearing = nil, nil
	b.putHeaderLocked()
	if err := b.flushLocked(); err != nil {
		return 0, err
	}
	if changed {
		// 3: the exact bits of the new chunk size.
		exact := make([]byte, bitmap.FilePages(nbytes)*bitmap.PageSize)
		copy(exact, nh.Marshal())
		eb := bitmap.BitsOf(exact)
		for c := range ctr {
			if ctr[c].Load()&kernMask != 0 {
				eb.Set(uint64(c))
			}
		}
		if err := b.writeImageLocked(exact, nbytes); err != nil {
			return 0, err
		}
	}
	b.setStorageLocked(b.img[:bitmap.FilePages(nbytes)*bitmap.PageSize], nbytes)
	for _, m := range b.t.Members() {
		tr, err := b.newTracker(m)
		if err != nil {
			return 0, err
		}
		b.trackers[m.Index] = tr // clean: everything is on disk
	}
	return nh.ChunkSize, nil
}

// setStorageLocked makes img (nbytes of storage) the bitmap image, with
// fresh per-member trackers.
func (b *Bitmap) setStorageLocked(img []byte, nbytes uint64) {
	b.img = img
	b.bytes = nbytes
	b.pageCap = uint64(len(img))
	b.trackers = make(map[int]*tracker)
}

// writeImageLocked writes the whole storage img (nbytes) to every member
// and keeps it as the image.
func (b *Bitmap) writeImageLocked(img []byte, nbytes uint64) error {
	b.setStorageLocked(img, nbytes)
	for _, m := range b.t.Members() {
		tr, err := b.newTracker(m)
		if err != nil {
			return err
		}
		tr.t.MarkAll()
		b.trackers[m.Index] = tr
	}
	if err := b.flushLocked(); err != nil {
		return fmt.Errorf("wib: resize: %w", err)
	}
	return nil
}
