package daemon

import (
	"mdtool/bitmap"
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
