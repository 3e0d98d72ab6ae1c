package layout

// Reshape is a raid4/5/6 array in the middle of a reshape: two striped
// geometries over the same members and the reshape point between them
// (raid5.c setup_conf, raid5_run, raid5_size, make_stripe_request and
// ahead_of_reshape in Linux 6.1).
//
// The reshape walks the array sectors from one end to the other. Going
// forwards (the usual direction, and the only one when devices are
// added), array sectors below Progress are in the new geometry and those
// at or above it are still in the old one; going backwards (devices
// removed, or data_offset moving up) it is mirrored: below Progress is
// old, at or above it new. Between Progress and Safe (md's
// reshape_safe, the last point recorded in the superblocks) lies the
// window being moved: md holds requests there until the window moves on.
// When nothing moves, Safe equals Progress and the window is empty.
type Reshape struct {
	Old, New *Striped
	// Progress is md's reshape_progress in array sectors (the
	// superblock's reshape_position at assembly).
	Progress uint64
	// Safe is md's reshape_safe: Progress at assembly.
	Safe uint64
	// Backwards is mddev->reshape_backwards.
	Backwards bool
}

// Side is where an array sector is served during a reshape.
type Side int

const (
	// SideNew: the sector has been moved (new geometry, new data offset).
	SideNew Side = iota
	// SideOld: the sector has not been moved yet (old geometry, old
	// data offset).
	SideOld
	// SideWindow: the sector is in the window being moved; md makes the
	// request wait (STRIPE_SCHEDULE_AND_RETRY) until the window moves.
	SideWindow
)

func (s Side) String() string {
	switch s {
	case SideNew:
		return "new"
	case SideOld:
		return "old"
	}
	return "window"
}

// ReshapeParams are the reshape fields of a v1.x superblock.
type ReshapeParams struct {
	Position   uint64 // reshape_position, array sectors
	NewLevel   Level
	NewLayout  int
	NewChunk   uint64 // sectors
	DeltaDisks int    // raid_disks = old + DeltaDisks
	// Backwards is MD_FEATURE_RESHAPE_BACKWARDS; md honours it only when
	// the disk count does not change (fewer disks always go backwards).
	Backwards bool
	// MinOffsetDiff is the smallest new_data_offset - data_offset of the
	// members (sectors; 0 when data_offset does not move).
	MinOffsetDiff int64
	// InPlace: data_offset does not move and mdadm's backup file keeps
	// the data a restart needs (Grow.c's child: it starts the array
	// read-only and backs each section up), so raid5_run's checks of the
	// position do not apply.
	InPlace bool
}

// NewReshape builds both geometries from the superblock's numbers
// (super_1_validate, setup_conf): p holds the superblock's level,
// layout and chunk, which are the old ones while a reshape is active, and
// its raid_disks, which is the new count; r holds the new level, layout
// and chunk and delta_disks (old count = raid_disks - delta_disks). It
// refuses what raid5_run refuses: a level change (md does those by
// takeover before the reshape starts), a reshape_position that is not on
// a boundary of the new geometry's stripes counted in the larger chunk,
// and a position at which the next stripe written would overlap the
// next one read (too early for auto-recovery; that needs mdadm's backup
// file). MinOffsetDiff is md's min_offset_diff: the smallest
// new_data_offset - data_offset over the members.
func NewReshape(p Params, r ReshapeParams) (*Reshape, error) {
	if r.NewLevel != p.Level {
		return nil, invalid("reshape: level change %v to %v is not a reshape md continues", p.Level, r.NewLevel)
	}
	oldP := p
	oldP.RaidDisks = p.RaidDisks - r.DeltaDisks
	newP := p
	newP.Layout, newP.ChunkSectors = r.NewLayout, r.NewChunk
	// raid5_size: the component size is rounded to both chunk sizes.
	if isPow2(p.ChunkSectors) && isPow2(r.NewChunk) {
		c := max(p.ChunkSectors, r.NewChunk)
		oldP.ComponentSectors &^= c - 1
		newP.ComponentSectors &^= c - 1
	}
	old, err := NewStriped(oldP)
	if err != nil {
		return nil, invalid("reshape: old geometry: %v", err)
	}
	nw, err := NewStriped(newP)
	if err != nil {
		return nil, invalid("reshape: new geometry: %v", err)
	}
	backwards := r.DeltaDisks < 0 || (r.DeltaDisks == 0 && r.Backwards)
	rs := &Reshape{Old: old, New: nw, Progress: r.Position, Safe: r.Position, Backwards: backwards}
	c := max(old.chunk, nw.chunk)
	if r.Position%(c*uint64(nw.k)) != 0 {
		return nil, invalid("reshape_position %d not on a stripe boundary (chunk %d, %d data disks)", r.Position, c, nw.k)
	}
	if r.Position > max(old.ArraySectors(), nw.ArraySectors()) {
		return nil, invalid("reshape_position %d beyond the array", r.Position)
	}
	hereNew := int64(r.Position / (c * uint64(nw.k)) * c)
	hereOld := int64(r.Position / (c * uint64(old.k)) * c)
	d := r.MinOffsetDiff
	switch {
	case r.InPlace && d == 0:
	case r.DeltaDisks == 0:
		if abs64(d) < int64(old.chunk) || abs64(d) < int64(nw.chunk) {
			return nil, invalid("in-place reshape (data_offset unchanged) needs mdadm's backup file")
		}
	case backwards && hereNew+d <= hereOld, !backwards && hereNew >= hereOld-d:
		return nil, invalid("reshape_position %d too early for auto-recovery", r.Position)
	}
	return rs, nil
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// ArraySectors is the array size while the reshape runs (raid5_size with
// the smaller of the old and new disk counts).
func (r *Reshape) ArraySectors() uint64 {
	return min(r.Old.ArraySectors(), r.New.ArraySectors())
}

// ahead is md's ahead_of_reshape.
func (r *Reshape) ahead(s, point uint64) bool {
	if r.Backwards {
		return s < point
	}
	return s >= point
}

// SideOf says which geometry serves array sector s: make_stripe_request's
// choice between the previous geometry (ahead of reshape_progress), a
// retry (ahead of reshape_safe only) and the new one.
func (r *Reshape) SideOf(s uint64) Side {
	switch {
	case r.ahead(s, r.Progress):
		return SideOld
	case r.ahead(s, r.Safe):
		return SideWindow
	}
	return SideNew
}

// Run returns the side of array sector s and how many sectors from s on
// (at most n) stay on that side.
func (r *Reshape) Run(s, n uint64) (Side, uint64) {
	side := r.SideOf(s)
	end := s + n
	for _, b := range [2]uint64{r.Progress, r.Safe} {
		if b > s && b < end {
			end = b
		}
	}
	return side, end - s
}
