package superblock

// Swap090 returns a copy of the first Size090 bytes of b with the byte
// order of a 0.90 superblock turned over, as mdadm 4.2 does for
// "-e 0.swap" and "--update=byteorder" (super0_swap_endian) and as its
// test helper swap_super does on disk: every 32-bit word is byte-reversed,
// then the two halves of the 64-bit event counters (events and
// cp_events) trade places. Nothing else is paired: reshape_position, the
// one other 64-bit field, keeps its two words where they were, as in
// mdadm. The checksum is not recomputed: it is a sum of the words, so it
// stays right in the new order. Swap090 of Swap090 is the identity. b
// must hold Size090 bytes (nil, ErrShort otherwise).
func Swap090(b []byte) ([]byte, error) {
	if len(b) < Size090 {
		return nil, ErrShort
	}
	s := make([]byte, Size090)
	for i := 0; i < Size090; i += 4 {
		s[i], s[i+1], s[i+2], s[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	// events_hi/lo (words 39, 40) and cp_events_hi/lo (words 41, 42)
	for _, off := range []int{0x09C, 0x0A4} {
		var t [4]byte
		copy(t[:], s[off:off+4])
		copy(s[off:off+4], s[off+4:off+8])
		copy(s[off+4:off+8], t[:])
	}
	return s, nil
}
