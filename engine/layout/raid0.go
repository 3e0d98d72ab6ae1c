package layout

// RAID0Geometry stripes over members of possibly different sizes in zones
// (raid0.c create_strip_zones, find_zone, map_sector).
type RAID0Geometry struct {
	chunk  uint64
	layout int      // effective layout: RAID0Original or RAID0Alternate
	sizes  []uint64 // per role, rounded down to the chunk
	zones  []raid0Zone
}

type raid0Zone struct {
	start    uint64 // first array sector (previous zone's zone_end)
	end      uint64 // zone_end
	devStart uint64 // member sector where the zone begins
	devs     []int  // roles in the zone, in role order
}

// NewRAID0 builds a raid0 geometry. Each member contributes DevSectors
// rounded down to the chunk. Zone k holds every member larger than the
// smallest member of zone k-1. With one zone, or when the second zone has a
// single member, the kernel forces the original layout; otherwise the
// layout must be RAID0Original or RAID0Alternate (else ErrRAID0Layout).
func NewRAID0(p Params) (*RAID0Geometry, error) {
	if p.RaidDisks < 1 {
		return nil, invalid("raid0 needs at least one device, got %d", p.RaidDisks)
	}
	if len(p.DevSectors) != p.RaidDisks {
		return nil, invalid("raid0: %d device sizes for %d devices", len(p.DevSectors), p.RaidDisks)
	}
	if p.ChunkSectors == 0 {
		return nil, invalid("raid0: chunk size must be set")
	}
	g := &RAID0Geometry{chunk: p.ChunkSectors, sizes: make([]uint64, p.RaidDisks)}
	smallest := ^uint64(0)
	for i, s := range p.DevSectors {
		g.sizes[i] = s - s%g.chunk
		smallest = min(smallest, g.sizes[i])
	}
	all := make([]int, p.RaidDisks)
	for i := range all {
		all[i] = i
	}
	end := smallest * uint64(p.RaidDisks)
	if end/uint64(p.RaidDisks) != smallest {
		return nil, invalid("raid0: size overflow")
	}
	g.zones = append(g.zones, raid0Zone{end: end, devs: all})
	for {
		devStart := smallest
		var devs []int
		smallest = ^uint64(0)
		for r, s := range g.sizes {
			if s > devStart {
				devs = append(devs, r)
				smallest = min(smallest, s)
			}
		}
		if len(devs) == 0 {
			break
		}
		start := end
		end += (smallest - devStart) * uint64(len(devs))
		if end < start {
			return nil, invalid("raid0: size overflow")
		}
		g.zones = append(g.zones, raid0Zone{start: start, end: end, devStart: devStart, devs: devs})
	}
	switch {
	case len(g.zones) == 1 || len(g.zones[1].devs) == 1:
		g.layout = RAID0Original
	case p.Layout == RAID0Original || p.Layout == RAID0Alternate:
		g.layout = p.Layout
	default:
		return nil, ErrRAID0Layout
	}
	return g, nil
}

func (g *RAID0Geometry) Level() Level               { return RAID0 }
func (g *RAID0Geometry) RaidDisks() int             { return len(g.sizes) }
func (g *RAID0Geometry) ChunkSectors() uint64       { return g.chunk }
func (g *RAID0Geometry) ArraySectors() uint64       { return g.zones[len(g.zones)-1].end }
func (g *RAID0Geometry) DevSectors(role int) uint64 { return g.sizes[role] }
func (g *RAID0Geometry) MaxCopies() int             { return 1 }

// Layout is the layout the kernel actually uses (RAID0Original or
// RAID0Alternate), after forcing the original one where it does not
// matter.
func (g *RAID0Geometry) Layout() int { return g.layout }

// Zones is the number of strip zones.
func (g *RAID0Geometry) Zones() int { return len(g.zones) }

// IOMin is the chunk size in bytes.
func (g *RAID0Geometry) IOMin() uint64 { return g.chunk << 9 }

// IOOpt is chunk × raid_disks in bytes.
func (g *RAID0Geometry) IOOpt() uint64 { return g.chunk << 9 * uint64(len(g.sizes)) }

// Map implements Geometry.
func (g *RAID0Geometry) Map(s uint64, dst []Loc) ([]Loc, uint64) {
	zi := 0
	for s >= g.zones[zi].end {
		zi++
	}
	z := &g.zones[zi]
	c := g.chunk
	nb := uint64(len(z.devs))
	rel := s - z.start // sector in the zone
	inChunk := s % c   // zone starts are chunk aligned: same as rel % c
	var idx uint64
	if g.layout == RAID0Original {
		idx = (s / c) % nb
	} else {
		idx = (rel / c) % nb
	}
	row := rel / (c * nb)
	return append(dst[:0], Loc{Role: z.devs[idx], Sector: row*c + inChunk + z.devStart}), c - inChunk
}

// Unmap implements Geometry.
func (g *RAID0Geometry) Unmap(role int, sector uint64) (uint64, bool) {
	if role < 0 || role >= len(g.sizes) || sector >= g.sizes[role] {
		return 0, false
	}
	c := g.chunk
	for i := range g.zones {
		z := &g.zones[i]
		nb := uint64(len(z.devs))
		if sector < z.devStart || sector >= z.devStart+(z.end-z.start)/nb {
			continue
		}
		idx := -1
		for j, r := range z.devs {
			if r == role {
				idx = j
			}
		}
		if idx < 0 {
			return 0, false
		}
		rel := sector - z.devStart
		row, inChunk := rel/c, rel%c
		var j uint64
		if g.layout == RAID0Original {
			base := (z.start / c) % nb
			j = (uint64(idx) + nb - base) % nb
		} else {
			j = uint64(idx)
		}
		return z.start + (row*nb+j)*c + inChunk, true
	}
	return 0, false
}
