package engine

import (
	"fmt"

	"mdtool/superblock"
)

// The shape of a restriping reshape as mdadm 4.2 sets it up without a
// backup file (Grow.c reshape_array, set_new_data_offset, choose_offset)
// and md 6.1 accepts it (raid5_check_reshape, raid5_start_reshape).

// ReshapeMinOffset is mdadm 4.2's min_offset_change for a reshape from
// oldData data disks with oldChunk sectors to newData with newChunk: the
// backup blocks (the least common multiple of the old and new data
// stripes) over the old data disks.
func ReshapeMinOffset(oldChunk, newChunk uint64, oldData, newData int) uint64 {
	a, b := oldChunk*uint64(oldData), newChunk*uint64(newData)
	g := a
	for r := b; r != 0; {
		g, r = r, g%r
	}
	return a / g * b / uint64(oldData)
}

// NoRoomError: the members lack the room mdadm 4.2 needs to move the data
// offset for the reshape (before the data when it moves down, after it
// when it moves up). mdadm would then fall back to a backup file, which
// mdtool does not support.
type NoRoomError struct {
	Backwards  bool   // the data would move up (room needed after it)
	Need, Have uint64 // sectors: min_offset_change, the smallest room
	Device     int    // the member (index as in MemberInfo.Device) with the least room
}

func (e *NoRoomError) Error() string {
	where := "head-space"
	if e.Backwards {
		where = "tail-space"
	}
	return fmt.Sprintf("insufficient %s for reshape: %d sectors needed, %d available; "+
		"mdadm would need a --backup-file, which mdtool does not support", where, e.Need, e.Have)
}

// Unwrap makes errors.Is(err, ErrNoRoom) hold.
func (e *NoRoomError) Unwrap() error { return ErrNoRoom }

// ErrShrinkSize: the array is larger than the geometry with fewer devices
// holds (md: "array size must be reduced before number of disks").
var ErrShrinkSize = fmt.Errorf("%w: array size must be reduced before number of disks", ErrUnsupported)

// spaceAfter is the room after a member's data area that a data offset
// moving up can use: mdadm getinfo_super1's space_after, to the end of
// the device for 1.1/1.2 (md's rdev size "0", the largest) or to the
// metadata at the end for 1.0, less the component size in use.
func spaceAfter(sb *superblock.Superblock, devSectors uint64) uint64 {
	end := devSectors
	if sb.DataOffset < sb.SuperOffset {
		end = sb.SuperOffset
		if sb.BBLogOffset != 0 && sb.BBLogSize != 0 {
			if bb := sb.SuperOffset + uint64(int64(int32(sb.BBLogOffset))); bb < end {
				end = bb
			}
		}
		if sb.FeatureMap&superblock.FeatureBitmapOffset != 0 {
			if bm := sb.SuperOffset + uint64(int64(int32(sb.BitmapOffset))); bm < end {
				end = bm
			}
		}
	}
	if sb.DataOffset+sb.Size >= end {
		return 0
	}
	return end - sb.DataOffset - sb.Size
}

// chooseOffset picks a new data offset in [min, max], near the middle of
// [lo, hi] and as aligned as it can (to 1 MiB at most): mdadm's
// choose_offset. Starting from the middle, each set bit from the lowest
// up is cleared by adding or subtracting it, whichever stays in range and
// further from the edges.
func chooseOffset(lo, hi, min, max uint64) uint64 {
	c := (lo + hi) / 2
	for bit := uint64(1); bit < 2048; bit <<= 1 {
		if c&bit == 0 {
			continue
		}
		up, down := c+bit, c-bit
		switch {
		case up > max && down < min:
			return c
		case up > max:
			c = down
		case down < min:
			c = up
		case hi-up > down-lo:
			c = up
		default:
			c = down
		}
	}
	return c
}

// reshapeOffsets decides, as mdadm 4.2's set_new_data_offset, the new
// data offset of every non-faulty member (by index in a.all, sectors
// relative to its data_offset) and the direction: fewer data disks move
// the data up by min (backwards), more move it down by min (forwards),
// the same number moves it the way with more room (down when the room
// before is larger), to choose_offset's point. want, when not 0, is the
// caller's offset change for every member (its sign gives the
// direction). Without the room it returns a *NoRoomError.
func (a *Array) reshapeOffsets(deltaData int, min uint64, want int64) (map[*member]int64, bool, error) {
	before, after := ^uint64(0), ^uint64(0)
	var devB, devA int
	var ms []*member
	for _, m := range a.all {
		if m.removed.Load() || m.State() == Faulty {
			continue
		}
		ms = append(ms, m)
		if b := spaceBefore(m.ls.sb); b < before {
			before, devB = b, m.index
		}
		if s := spaceAfter(m.ls.sb, uint64(m.dev.Geometry().Size)>>9); s < after {
			after, devA = s, m.index
		}
	}
	if len(ms) == 0 {
		return nil, false, fmt.Errorf("%w: no members", ErrFailed)
	}
	backwards := deltaData < 0
	switch {
	case want != 0:
		backwards = want > 0
	case deltaData == 0:
		backwards = before <= after
	}
	if want != 0 && uint64(abs(want)) < min {
		return nil, false, fmt.Errorf("%w: data_offset must move by at least %d sectors", ErrUnsupported, min)
	}
	if want != 0 && (deltaData > 0 && want > 0 || deltaData < 0 && want < 0) {
		return nil, false, fmt.Errorf("%w: data_offset must move %s for this reshape", ErrUnsupported,
			map[bool]string{true: "up", false: "down"}[deltaData < 0])
	}
	need := min
	if want != 0 {
		need = uint64(abs(want))
	}
	if backwards && after < need {
		return nil, true, &NoRoomError{Backwards: true, Need: need, Have: after, Device: devA}
	}
	if !backwards && before < need {
		return nil, false, &NoRoomError{Need: need, Have: before, Device: devB}
	}
	offs := make(map[*member]int64, len(ms))
	for _, m := range ms {
		d := int64(m.dataOff >> 9)
		switch {
		case want != 0:
			offs[m] = want
		case deltaData > 0:
			offs[m] = -int64(min)
		case deltaData < 0:
			offs[m] = int64(min)
		case backwards:
			o := uint64(d)
			offs[m] = int64(chooseOffset(o, o+after, o+min, o+after)) - d
		default:
			o := uint64(d)
			offs[m] = int64(chooseOffset(o-before, o, o-before, o-min)) - d
		}
	}
	return offs, backwards, nil
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
