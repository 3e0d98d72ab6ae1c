package superblock

// Raw views of encoded superblocks, for callers that must show what a
// damaged superblock holds the way mdadm reads it from memory (past the
// end of a field, or of the format), rather than the decoded fields.

// Field offsets the raw views use.
const (
	offSetName = 0x20
)

// NameCString returns set_name of the encoded v1 superblock b read as a C
// string: the bytes from set_name (offset 0x20) up to the first NUL. When
// the 32 bytes of set_name hold no NUL it runs on into ctime and the
// fields after it, up to the end of b, as mdadm's strchr and printf do on
// such a name. It returns nil when b ends before set_name.
func NameCString(b []byte) []byte {
	if len(b) <= offSetName {
		return nil
	}
	s := b[offSetName:]
	for i, c := range s {
		if c == 0 {
			return s[:i]
		}
	}
	return s
}

// ClearFeatures clears bits in the feature_map of the encoded v1
// superblock b in place (mdadm does so in memory when it ignores an
// internal bitmap). The checksum is left as it is. b shorter than
// HeaderSize is left alone.
func ClearFeatures(b []byte, bits uint32) {
	if len(b) < HeaderSize {
		return
	}
	le.PutUint32(b[offFeatureMap:], le.Uint32(b[offFeatureMap:])&^bits)
}

// Disk090Words returns the words number, major, minor, raid_disk and state
// of disk descriptor d (-1: this_disk) of the little-endian 0.90
// superblock at the start of b. A descriptor beyond the Disks090 of the
// format is read where mdadm's array indexing finds it: on into this_disk
// and whatever follows the superblock in b. Words beyond b, and every word
// of a d below -1, are zero.
func Disk090Words(b []byte, d int) [5]uint32 {
	var r [5]uint32
	if d < -1 {
		return r
	}
	off := off090ThisDisk
	if d >= 0 {
		off = off090Disks + 128*d
	}
	for i := range r {
		if o := off + 4*i; o >= 0 && o+4 <= len(b) {
			r[i] = le.Uint32(b[o:])
		}
	}
	return r
}
