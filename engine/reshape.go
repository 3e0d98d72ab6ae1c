package engine

import (
	"fmt"
	"sync/atomic"

	"mdtool/engine/layout"
	"mdtool/superblock"
)

// A reshape the kernel (or mdtool) left in the superblocks
// (MD_FEATURE_RESHAPE_ACTIVE): the engine serves the array through both
// geometries, each array sector through the one md would use
// (layout.Reshape), the old geometry at the members' data_offset and the
// new one at data_offset + new_offset (raid5.c use_new_offset). The
// superblocks keep the reshape fields exactly as they were, so that the
// kernel continues the reshape from reshape_position.

// reshapeBits are the feature bits of an active reshape.
const reshapeBits = superblock.FeatureReshapeActive | superblock.FeatureReshapeBackwards | superblock.FeatureNewOffset

func reshapeActive(sb *superblock.Superblock) bool {
	return sb.FeatureMap&superblock.FeatureReshapeActive != 0
}

// reshapeGeometry builds the two geometries of an active reshape from the
// reference superblock and the members' data offsets (raid5.c
// setup_conf and raid5_run) and returns the new one, the array's
// nominal geometry (its raid_disks are the superblock's).
func (a *Array) reshapeGeometry(ref *superblock.Superblock, p layout.Params) (layout.Geometry, error) {
	switch a.level {
	case layout.RAID4, layout.RAID5, layout.RAID6:
	default:
		return nil, fmt.Errorf("%w: reshape of %v", ErrUnsupported, a.level)
	}
	backwards := ref.FeatureMap&superblock.FeatureReshapeBackwards != 0 || int32(ref.DeltaDisks) < 0
	minDiff := mdMinOffsetDiff(a.all, backwards, nil)
	rs, err := layout.NewReshape(p, layout.ReshapeParams{
		Position:      ref.ReshapePosition,
		NewLevel:      layout.Level(ref.NewLevel),
		NewLayout:     int(ref.NewLayout),
		NewChunk:      uint64(ref.NewChunk),
		DeltaDisks:    int(ref.DeltaDisks),
		Backwards:     ref.FeatureMap&superblock.FeatureReshapeBackwards != 0,
		MinOffsetDiff: minDiff,
		InPlace:       ref.FeatureMap&superblock.FeatureNewOffset == 0 && int32(ref.DeltaDisks) <= 0,
	})
	if err != nil {
		return nil, err
	}
	a.rs = &reshapeState{geo: rs}
	a.rs.progress.Store(rs.Progress)
	a.rs.safe.Store(rs.Safe)
	return rs.New, nil
}

// reshapeState is the running state of a reshape: the two geometries,
// md's reshape_progress (how far data has moved) and reshape_safe (what
// the superblocks record). The engine moves a window only while no user
// request touches it (gate, reshape_gate.go), so a request sees its
// sectors' side fixed.
type reshapeState struct {
	geo            *layout.Reshape // Progress and Safe as at Open
	progress, safe atomic.Uint64
	done           atomic.Bool // finished: the array runs in the new geometry
	rec            reshapeRecord
	gate           reshapeGate
	slide          *slideState // an in-place reshape keeping or lowering the data devices (reshape_slide.go)
}

// now is the reshape with its current progress and safe point.
func (rs *reshapeState) now() layout.Reshape {
	r := *rs.geo
	r.Progress, r.Safe = rs.progress.Load(), rs.safe.Load()
	return r
}

// reshaping says whether the array is in the middle of a reshape.
func (a *Array) reshaping() bool { return a.rs != nil && !a.rs.done.Load() }

// Reshaping reports whether a reshape is recorded in the superblocks,
// and where it stands (reshape_progress, array sectors).
func (a *Array) Reshaping() (active bool, position uint64) {
	if !a.reshaping() {
		return false, 0
	}
	return true, a.rs.progress.Load()
}

// reshapePers serves an array in the middle of a reshape: each piece of
// a request goes, split at the reshape point and at that geometry's
// stripes, to the striped personality of its side.
type reshapePers struct {
	a        *Array
	rs       *reshapeState
	old, new *stripedPers
	mover    *stripedPers // new, for the reshape's writes (no bitmap bits)
	// unit (bytes) is where Array.pieces may cut a request: a whole
	// number of stripes in both geometries (their least common multiple),
	// so that each side's full stripes reach each with its own split.
	unit int64
}

func (a *Array) newReshapePers() *reshapePers {
	r6 := a.level == layout.RAID6
	so, sn := int64(a.rs.geo.Old.StripeSectors()), int64(a.rs.geo.New.StripeSectors())
	return &reshapePers{a: a, rs: a.rs, unit: so / gcd(so, sn) * sn << 9,
		old:   &stripedPers{a: a, g: a.rs.geo.Old, r6: r6},
		new:   &stripedPers{a: a, g: a.rs.geo.New, r6: r6, newOff: true},
		mover: &stripedPers{a: a, g: a.rs.geo.New, r6: r6, newOff: true, mover: true}}
}

// each calls fn for the pieces of [sector, sector+count): on one side of
// the reshape point, and either whole stripes of that side's geometry
// (full) or a part of one stripe.
func (rp *reshapePers) each(sector, count uint64, fn func(sp *stripedPers, s, n uint64, full bool) error) error {
	maxReq := uint64(rp.a.maxReq >> 9)
	key := sector >> 11
	e := rp.rs.gate.enter(key, sector, count)
	defer rp.rs.gate.leave(key, e)
	r := rp.rs.now()
	for s, end := sector, sector+count; s < end; {
		side, run := r.Run(s, end-s)
		var sp *stripedPers
		switch side {
		case layout.SideOld:
			sp = rp.old
		case layout.SideNew:
			sp = rp.new
		default:
			// Moved, but not yet recorded: md holds the request until
			// the superblocks record the move; record it now.
			if err := rp.a.recordReshape(); err != nil {
				return err
			}
			r = rp.rs.now()
			continue
		}
		var sl splitter
		unit := sp.g.StripeSectors()
		sl.init(int64(s), int64(run), int64(unit), int64(max(maxReq/unit, 1)*unit))
		for {
			o, n, full, ok := sl.next()
			if !ok {
				break
			}
			if err := fn(sp, uint64(o), uint64(n), full); err != nil {
				return err
			}
		}
		s += run
	}
	return nil
}

func (rp *reshapePers) read(p []byte, sector uint64) error {
	return rp.each(sector, uint64(len(p)>>9), func(sp *stripedPers, s, n uint64, _ bool) error {
		o := (s - sector) << 9
		return sp.read(p[o:o+n<<9], s)
	})
}

func (rp *reshapePers) write(p []byte, sector uint64, _, fua bool) error {
	return rp.each(sector, uint64(len(p)>>9), func(sp *stripedPers, s, n uint64, full bool) error {
		o := (s - sector) << 9
		return sp.write(p[o:o+n<<9], s, full, fua)
	})
}

func (rp *reshapePers) zero(sector, count uint64, _, discard bool) error {
	return rp.each(sector, count, func(sp *stripedPers, s, n uint64, full bool) error {
		return sp.zero(s, n, full, discard)
	})
}

// gcd is the greatest common divisor of two positive numbers.
func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
