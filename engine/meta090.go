package engine

import (
	"fmt"

	"mdtool/superblock"
)

// Minor090 is the superblock "minor" that selects 0.90 metadata in Open
// and loadSuper (1.x minors are 0, 1 and 2).
const Minor090 = 90

// load090 reads a 0.90 superblock as the kernel's super_90_load does (at
// the 64 KiB-aligned end) and gives the engine its v1 view
// (superblock.V1View). A superblock the kernel refuses (checksum, version,
// a size that does not fit, other-endian) is returned with err set.
func load090(d Device) (*loadedSuper, error) {
	size := uint64(d.Geometry().Size)
	if size < superblock.MinDevBytes090 {
		return nil, ErrNoSuperblock
	}
	off := superblock.Offset090(size)
	raw := make([]byte, superblock.Size090)
	if err := readFull(d, raw, int64(off)); err != nil {
		return nil, err
	}
	sb, err := superblock.Parse090(raw)
	if sb == nil {
		return nil, ErrNoSuperblock
	}
	if err == nil {
		err = sb.CheckDevice(size)
	}
	if err == nil && sb.MinorVersion != 90 {
		err = fmt.Errorf("%w: 0.90 superblock of a reshape (minor 91)", ErrUnsupported)
	}
	return &loadedSuper{minor: Minor090, offset: off / 512, raw: raw, sb: sb.V1View(size), err: err, v090: sb}, nil
}

// sync090 is super_90_sync for member m (its v1 view is already updated
// by syncSuper): the disk table from every member's state, the array's
// events, clean state and bitmap. It returns the 4 KiB to write.
func (a *Array) sync090(m *member) []byte {
	var ms []superblock.Member090
	self := -1
	for _, o := range a.order090() {
		if o == m {
			self = len(ms)
		}
		st := o.State()
		mm := superblock.Member090{Role: -1, WriteMostly: o.writeMostly, FailFast: o.failFast}
		if o.ls != nil && o.ls.v090 != nil {
			mm.Major, mm.Minor = o.ls.v090.ThisDisk.Major, o.ls.v090.ThisDisk.Minor
		}
		switch st {
		case Faulty:
			mm.Faulty = true
		case InSync:
			mm.Role, mm.InSync = o.role, true
		}
		// A recovering member is not In_sync: md lists it as a spare
		// (0.90 has nowhere to keep its recovery offset).
		ms = append(ms, mm)
	}
	v := m.ls.sb
	sb := superblock.Sync090(m.ls.v090, ms, self, a.meta.events, uint32(v.UTime.Seconds()), uint32(v.Size/2),
		a.meta.inSync, a.meta.recoveryCP, a.hasBM && a.bmFile == nil)
	enc := sb.Marshal()
	copy(m.ls.raw, enc)
	return enc
}

// bitmapUUID is the uuid the array's bitmap superblock must carry: the
// array UUID, or for 0.90 its set_uuid words in memory order
// (superblock.BitmapUUID090).
func (a *Array) bitmapUUID() [16]byte {
	for _, m := range a.all {
		if m != nil && m.ls != nil && m.ls.v090 != nil {
			return m.ls.v090.BitmapUUID090()
		}
	}
	return a.uuid
}

// is090 says whether the array's members carry 0.90 superblocks.
func (a *Array) is090() bool {
	for _, m := range a.all {
		if m != nil && m.ls != nil && m.ls.v090 != nil {
			return true
		}
	}
	return false
}

// area090 is what mdadm 4.2's write_bitmap0 writes after a 0.90
// superblock: the bitmap (header and bits, buf) padded with all-ones to
// 60 KiB, the room md gives a 0.90 bitmap.
func area090(buf []byte) []byte {
	const room = 60 << 10
	if len(buf) >= room {
		return buf
	}
	out := make([]byte, room)
	copy(out, buf)
	for i := len(buf); i < room; i++ {
		out[i] = 0xff
	}
	return out
}

// refuse090 refuses the operations that would write 1.x metadata or
// change the geometry of a 0.90 array (not supported yet: growing,
// reshaping).
func (a *Array) refuse090(what string) error {
	for _, m := range a.all {
		if m != nil && m.ls != nil && m.ls.v090 != nil {
			return fmt.Errorf("%w: %s on an array with 0.90 metadata", ErrUnsupported, what)
		}
	}
	return nil
}
