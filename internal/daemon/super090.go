package daemon

import (
	"io"

	"mdtool/bitmap"
	"mdtool/engine"
	"mdtool/internal/mdadm/plan"
	"mdtool/superblock"
)

// view090 reads a 0.90 superblock at byte sbOffset (its area in buf) as
// its v1 view (superblock.V1View), encoded as a v1 superblock, which is
// what Status carries; ok is false when buf holds no valid 0.90
// superblock.
func view090(buf []byte, sbOffset int64) (*superblock.Superblock, []byte, bool) {
	if len(buf) < superblock.Size090 {
		return nil, nil, false
	}
	sb, err := superblock.Parse090(buf[:superblock.Size090])
	if sb == nil || err != nil {
		return nil, nil, false
	}
	v := sb.V1View(uint64(sbOffset) + superblock.Reserved090)
	return v, v.MarshalWithChecksum(), true
}

// read090 is the member's 0.90 superblock area, or nil when it holds no
// valid one (a 1.x member).
func read090(m *MemberSpec) []byte {
	buf := make([]byte, superblock.Size090)
	if _, err := m.Dev.ReadAt(buf, m.SBOffset); err != nil {
		return nil
	}
	if sb, err := superblock.Parse090(buf); sb == nil || err != nil {
		return nil
	}
	return buf
}

// growBitmapPlan is mdadm's add_internal_bitmap for --grow on member m
// (sb: its superblock or 0.90 view): add_internal_bitmap0 for 0.90,
// add_internal_bitmap1 otherwise.
func growBitmapPlan(m *MemberSpec, sb *superblock.Superblock, chunk uint64) (int32, bitmap.Header, error) {
	if raw := read090(m); raw != nil {
		if sb090, err := superblock.Parse090(raw); sb090 != nil && err == nil {
			return plan.GrowBitmap090(sb090, sb, chunk)
		}
	}
	return plan.GrowBitmap(sb, chunk)
}

// added090 is what the add path needs of a device's 0.90 superblock
// (s.cfg.SuperMinor 90): whether it is one of this array's (uuid) and
// was an active member (mdadm's attempt_re_add: this_disk ACTIVE and not
// FAULTY). ok is false when the array is not 0.90 or dev holds no valid
// 0.90 superblock.
func (s *Service) added090(dev io.ReaderAt, size int64) (sameArray, wasActive, ok bool) {
	if s.cfg.SuperMinor != engine.Minor090 || size < superblock.MinDevBytes090 {
		return false, false, false
	}
	buf := make([]byte, superblock.Size090)
	if _, err := dev.ReadAt(buf, int64(superblock.Offset090(uint64(size)))); err != nil {
		return false, false, false
	}
	sb, err := superblock.Parse090(buf)
	if sb == nil || err != nil {
		return false, false, false
	}
	sameArray = sb.UUID() == s.cfg.Array.UUID()
	st := sb.ThisDisk.State
	return sameArray, sameArray && st&superblock.Disk090Active != 0 && st&superblock.Disk090Faulty == 0, true
}

// record090 fills in spec's superblock location and dev_number from the
// device's 0.90 superblock (recordMember for SuperMinor 90).
func record090(spec *MemberSpec, size int64) {
	if size < superblock.MinDevBytes090 {
		return
	}
	spec.SBOffset = int64(superblock.Offset090(uint64(size)))
	if buf := read090(spec); buf != nil {
		sb, _ := superblock.Parse090(buf)
		spec.DevNumber = int(sb.ThisDisk.Number)
		spec.FailFast = sb.ThisDisk.State&superblock.Disk090FailFast != 0
	}
}
