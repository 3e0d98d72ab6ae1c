package bitmap

// AreaAlign returns the padding boundary mdadm 4.2's write_bitmap1 uses for
// a bitmap at the given bitmap_offset (sectors): 4096 when the offset is a
// multiple of 8 sectors ("compatible with older mdadm"), else 512.
func AreaAlign(bitmapOffset int32) int {
	if bitmapOffset&7 != 0 {
		return 512
	}
	return 4096
}

// AreaSize returns the bytes mdadm writes for one node's bitmap:
// calc_bitmap_size, i.e. 256 + ceil(chunks/8) rounded up to align (a power
// of two; 512 or 4096 from [AreaAlign]).
func AreaSize(h *Header, align int) uint64 {
	a := uint64(align)
	return (h.Bytes() + a - 1) &^ (a - 1)
}

// NewArea returns the bytes mdadm 4.2's write_bitmap1 puts on a member when
// it creates (or grows in) an internal bitmap: for each node (one when
// h.Nodes is 0, else h.Nodes), the marshalled header followed by the bit
// array and padding up to [AreaSize], the nodes back to back. Node 0's bits
// and padding are all fill (mdadm: 0xff, "only the bitmap[0] should resync
// whole device on initial assembly"); other nodes' are 0x00 and still start
// with the same header. Bits past the last chunk are fill too, and are
// ignored by readers.
//
// align is 512 or 4096, normally [AreaAlign] of the bitmap_offset. mdadm
// writes through 4096-byte buffers with read-modify-write of the device's
// last logical block, so nothing beyond these bytes changes on disk.
func NewArea(h *Header, fill byte, align int) []byte {
	size := AreaSize(h, align)
	nodes := uint64(1)
	if h.Nodes > 1 {
		nodes = uint64(h.Nodes)
	}
	out := make([]byte, size*nodes)
	hdr := h.Marshal()
	for i := uint64(0); i < nodes; i++ {
		node := out[i*size : (i+1)*size]
		if i == 0 && fill != 0 {
			for j := range node {
				node[j] = fill
			}
		}
		copy(node, hdr)
	}
	return out
}
