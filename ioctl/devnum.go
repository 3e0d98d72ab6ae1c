package ioctl

// Major returns the major number of a Linux dev_t (glibc encoding, as
// returned in stat's st_rdev).
func Major(dev uint64) uint32 {
	return uint32((dev>>32)&0xfffff000 | (dev>>8)&0x00000fff)
}

// Minor returns the minor number of a Linux dev_t.
func Minor(dev uint64) uint32 {
	return uint32((dev>>12)&0xffffff00 | dev&0x000000ff)
}

// Mkdev builds a Linux dev_t from major and minor numbers.
func Mkdev(major, minor uint32) uint64 {
	d := uint64(major&0x00000fff) << 8
	d |= uint64(major&0xfffff000) << 32
	d |= uint64(minor & 0x000000ff)
	d |= uint64(minor&0xffffff00) << 12
	return d
}
