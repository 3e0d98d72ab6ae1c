package layout

import "sort"

// LinearGeometry concatenates the members in role order (md-linear.c).
type LinearGeometry struct {
	chunk uint64
	sizes []uint64 // per role, rounded down to the chunk when one is set
	ends  []uint64 // ends[i] = first array sector after role i
}

// NewLinear builds a linear (level -1) geometry. Each member contributes
// its DevSectors rounded down to ChunkSectors when that is non-zero
// (linear_conf).
func NewLinear(p Params) (*LinearGeometry, error) {
	if p.RaidDisks < 1 {
		return nil, invalid("linear needs at least one device, got %d", p.RaidDisks)
	}
	if len(p.DevSectors) != p.RaidDisks {
		return nil, invalid("linear: %d device sizes for %d devices", len(p.DevSectors), p.RaidDisks)
	}
	g := &LinearGeometry{
		chunk: p.ChunkSectors,
		sizes: make([]uint64, p.RaidDisks),
		ends:  make([]uint64, p.RaidDisks),
	}
	var end uint64
	for i, s := range p.DevSectors {
		if g.chunk != 0 {
			s -= s % g.chunk
		}
		g.sizes[i] = s
		end += s
		if end < s {
			return nil, invalid("linear: size overflow")
		}
		g.ends[i] = end
	}
	return g, nil
}

func (g *LinearGeometry) Level() Level               { return Linear }
func (g *LinearGeometry) RaidDisks() int             { return len(g.sizes) }
func (g *LinearGeometry) ChunkSectors() uint64       { return g.chunk }
func (g *LinearGeometry) ArraySectors() uint64       { return g.ends[len(g.ends)-1] }
func (g *LinearGeometry) DevSectors(role int) uint64 { return g.sizes[role] }
func (g *LinearGeometry) MaxCopies() int             { return 1 }
func (g *LinearGeometry) IOMin() uint64              { return 0 }
func (g *LinearGeometry) IOOpt() uint64              { return 0 }

// Map implements Geometry (which_dev: the first member whose end is past s).
func (g *LinearGeometry) Map(s uint64, dst []Loc) ([]Loc, uint64) {
	i := sort.Search(len(g.ends), func(i int) bool { return s < g.ends[i] })
	start := g.ends[i] - g.sizes[i]
	return append(dst[:0], Loc{Role: i, Sector: s - start}), g.ends[i] - s
}

// Unmap implements Geometry.
func (g *LinearGeometry) Unmap(role int, sector uint64) (uint64, bool) {
	if role < 0 || role >= len(g.sizes) || sector >= g.sizes[role] {
		return 0, false
	}
	return g.ends[role] - g.sizes[role] + sector, true
}

// RAID1Geometry mirrors every array sector on every member (raid1.c);
// multipath's paths map the same way (md-multipath.c).
type RAID1Geometry struct {
	n     int
	size  uint64
	level Level
}

// NewRAID1 builds a raid1 geometry: array size = ComponentSectors.
func NewRAID1(p Params) (*RAID1Geometry, error) {
	if p.RaidDisks < 1 {
		return nil, invalid("%v needs at least one device, got %d", p.Level, p.RaidDisks)
	}
	level := RAID1
	if p.Level == Multipath {
		level = Multipath
	}
	return &RAID1Geometry{n: p.RaidDisks, size: p.ComponentSectors, level: level}, nil
}

func (g *RAID1Geometry) Level() Level               { return g.level }
func (g *RAID1Geometry) RaidDisks() int             { return g.n }
func (g *RAID1Geometry) ChunkSectors() uint64       { return 0 }
func (g *RAID1Geometry) ArraySectors() uint64       { return g.size }
func (g *RAID1Geometry) DevSectors(role int) uint64 { return g.size }
func (g *RAID1Geometry) MaxCopies() int             { return g.n }
func (g *RAID1Geometry) IOMin() uint64              { return 0 }
func (g *RAID1Geometry) IOOpt() uint64              { return 0 }

// Map implements Geometry: one Loc per role, all at sector s. The caller
// picks the in-sync mirrors.
func (g *RAID1Geometry) Map(s uint64, dst []Loc) ([]Loc, uint64) {
	dst = dst[:0]
	for r := 0; r < g.n; r++ {
		dst = append(dst, Loc{Role: r, Sector: s})
	}
	return dst, g.size - s
}

// Unmap implements Geometry.
func (g *RAID1Geometry) Unmap(role int, sector uint64) (uint64, bool) {
	if role < 0 || role >= g.n || sector >= g.size {
		return 0, false
	}
	return sector, true
}
